-- A knowledge base's index state (embedding-model migrations, docs/architecture.md): its settings,
-- which name its current index generation, and the target generation and id of its running
-- migration (at most one RUNNING per knowledge base: a partial unique index). One definition for
-- every reader: the plan read on its own (embedding_migrations.sql's index_state), with a job's
-- document (pipeline.sql's load_document) and with the READY commit (publish_revision).
CREATE VIEW knowledge_base_index_state AS
SELECT kb.id AS knowledge_base_id, kb.settings, m.target AS migration_target, m.id AS migration_id
FROM knowledge_bases kb
LEFT JOIN embedding_migrations m ON m.knowledge_base_id = kb.id AND m.status = 'RUNNING';
