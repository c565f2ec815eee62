-- What a job reads of its document when it starts (domain.models.PipelineDocument): the document's
-- facts with its knowledge base's deletion flag and index state (settings, running migration). One
-- definition for both readers: the claim, which returns each claimed job's document with it
-- (queue.sql's claim: no read of its own when the run starts), and pipeline.sql's load_document.
CREATE VIEW pipeline_documents AS
SELECT d.id, d.knowledge_base_id, d.filename, d.mime_type, d.object_key, d.sha256, d.status, d.content_revision,
       d.created_at, d.source, d.dedup_exempt, s.settings AS kb_settings, kb.deleting AS kb_deleting,
       s.migration_target, s.migration_id
FROM documents d
JOIN knowledge_bases kb ON kb.id = d.knowledge_base_id
JOIN knowledge_base_index_state s ON s.knowledge_base_id = d.knowledge_base_id;
