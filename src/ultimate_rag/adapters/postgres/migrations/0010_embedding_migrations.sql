-- Embedding-model migrations (docs/architecture.md, "Embedding-model migration").
-- One row per migration of a knowledge base to another embedding model; at most one RUNNING per
-- knowledge base. Its items are the documents to embed into the new index generation: durable,
-- leased work with the same lease, fencing and retry rules as ingestion jobs (a table of their
-- own: the one-job-per-document table stays as it is).
CREATE TABLE embedding_migrations (
    id                bigserial PRIMARY KEY,
    knowledge_base_id uuid NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    status            text NOT NULL DEFAULT 'RUNNING',
    source            jsonb NOT NULL,           -- {embedder, model, dimension, generation} it replaces
    target            jsonb NOT NULL,           -- {embedder, model, dimension, generation} it builds
    error_message     text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    dropped_at        timestamptz               -- the generation that lost was dropped
);
CREATE UNIQUE INDEX embedding_migrations_running_idx ON embedding_migrations (knowledge_base_id)
    WHERE status = 'RUNNING';
CREATE INDEX embedding_migrations_undropped_idx ON embedding_migrations (finished_at)
    WHERE status <> 'RUNNING' AND dropped_at IS NULL;

CREATE TABLE embedding_migration_items (
    id            bigserial PRIMARY KEY,
    migration_id  bigint NOT NULL REFERENCES embedding_migrations(id) ON DELETE CASCADE,
    document_id   uuid NOT NULL,
    status        text NOT NULL DEFAULT 'PENDING',
    attempts      integer NOT NULL DEFAULT 0,
    max_attempts  integer NOT NULL,
    available_at  timestamptz NOT NULL DEFAULT now(),
    locked_by     text,
    locked_at     timestamptz,
    chunks        integer NOT NULL DEFAULT 0,
    from_cache    integer NOT NULL DEFAULT 0,
    last_error    text,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (migration_id, document_id)
);
CREATE INDEX embedding_migration_items_due_idx ON embedding_migration_items (available_at)
    WHERE status IN ('PENDING', 'RUNNING');
CREATE INDEX embedding_migration_items_document_idx ON embedding_migration_items (document_id);
