-- The published revision (SPEC §4 rule 3, revised): a document has the revision search serves (its
-- last revision that reached READY) and possibly a newer one in the pipeline. Every rebuild (reindex,
-- re-upload, recover, connector re-sync) is a new ``content_revision``; its chunks, vectors, assets
-- and snapshot are written beside the published ones and the READY commit swaps ``published_revision``
-- in one transaction. NULL: nothing of the document is searchable (never READY, deleted, OUTDATED).
ALTER TABLE documents ADD COLUMN published_revision integer;

-- chunks and assets carry the revision they belong to
ALTER TABLE chunks ADD COLUMN revision integer;
UPDATE chunks c SET revision = d.content_revision FROM documents d WHERE d.id = c.document_id;
ALTER TABLE chunks ALTER COLUMN revision SET NOT NULL, ALTER COLUMN revision SET DEFAULT 1;
ALTER TABLE chunks DROP CONSTRAINT chunks_document_id_ordinal_key;
ALTER TABLE chunks ADD CONSTRAINT chunks_document_revision_ordinal_key UNIQUE (document_id, revision, ordinal);

ALTER TABLE document_assets ADD COLUMN revision integer;
UPDATE document_assets a SET revision = d.content_revision FROM documents d WHERE d.id = a.document_id;
ALTER TABLE document_assets ALTER COLUMN revision SET NOT NULL, ALTER COLUMN revision SET DEFAULT 1;

-- documents that are READY now are published, with no manual step; a document being rebuilt right
-- now (queued or running over a READY one) was out of search under the old rule and comes back at
-- its READY commit
UPDATE documents SET published_revision = content_revision WHERE status = 'READY';

-- bulk reindex progress (GET /api/knowledge-bases/{id}/reindex): the documents a bulk reindex
-- queued carry the knowledge base's ``rebuild_started_at``
ALTER TABLE knowledge_bases ADD COLUMN rebuild_started_at timestamptz;
ALTER TABLE documents ADD COLUMN rebuild_started_at timestamptz;
CREATE INDEX documents_kb_rebuild_idx ON documents (knowledge_base_id, rebuild_started_at)
    WHERE rebuild_started_at IS NOT NULL;
