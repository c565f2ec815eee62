-- The initial schema: knowledge bases, documents, their single ingestion job, chunks, assets,
-- API keys and the embedding cache. Vector tables are created per embedding dimension by the
-- pgvector adapter (one table per model dimension, like a Milvus collection).

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE knowledge_bases (
    id           uuid PRIMARY KEY,
    name         text NOT NULL,
    description  text NOT NULL DEFAULT '',
    settings     jsonb NOT NULL DEFAULT '{}'::jsonb,
    deleting     boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX knowledge_bases_name_key ON knowledge_bases (lower(name));

CREATE TABLE documents (
    id                uuid PRIMARY KEY,
    knowledge_base_id uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    filename          text NOT NULL,
    mime_type         text NOT NULL,
    size_bytes        bigint NOT NULL,
    sha256            text NOT NULL,
    object_key        text NOT NULL,
    status            text NOT NULL,
    error_message     text,
    progress          jsonb NOT NULL DEFAULT '{}'::jsonb,
    parser_name       text,
    parser_version    text,
    chunk_count       integer NOT NULL DEFAULT 0,
    content_revision  integer NOT NULL DEFAULT 1,
    source            jsonb NOT NULL DEFAULT '{"kind": "upload"}'::jsonb,
    duplicate_of      uuid REFERENCES documents (id) ON DELETE SET NULL,
    stage_timings     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    indexed_at        timestamptz,
    deleted_at        timestamptz,
    CONSTRAINT documents_status_check CHECK (status IN (
        'UPLOADING', 'FETCHING', 'PENDING', 'PARSING', 'CHUNKING', 'EMBEDDING', 'INDEXING',
        'DELETING', 'READY', 'FAILED', 'DELETED', 'OUTDATED'))
);
-- listing by knowledge base, newest first, with a stable cursor (created_at, id)
CREATE INDEX documents_kb_created_idx ON documents (knowledge_base_id, created_at DESC, id DESC);
CREATE INDEX documents_kb_status_idx ON documents (knowledge_base_id, status, created_at DESC, id DESC);
CREATE INDEX documents_kb_sha_idx ON documents (knowledge_base_id, sha256);

CREATE TABLE ingestion_jobs (
    id             uuid PRIMARY KEY,
    document_id    uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    operation      text NOT NULL DEFAULT 'ingest',
    force          boolean NOT NULL DEFAULT false,
    status         text NOT NULL,
    attempts       integer NOT NULL DEFAULT 0,
    max_attempts   integer NOT NULL,
    available_at   timestamptz NOT NULL DEFAULT now(),
    locked_by      text,
    locked_at      timestamptz,
    last_error     text,
    error_history  jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CONSTRAINT ingestion_jobs_status_check CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED')),
    CONSTRAINT ingestion_jobs_operation_check CHECK (operation IN ('ingest', 'delete')),
    CONSTRAINT ingestion_jobs_running_is_locked CHECK (status <> 'RUNNING' OR (locked_by IS NOT NULL AND locked_at IS NOT NULL))
);
-- exactly one job per document
CREATE UNIQUE INDEX ingestion_jobs_document_key ON ingestion_jobs (document_id);
-- the claim only ever looks at these two small partial indexes, however many finished jobs exist
CREATE INDEX ingestion_jobs_pending_idx ON ingestion_jobs (available_at, created_at) WHERE status = 'PENDING';
CREATE INDEX ingestion_jobs_running_idx ON ingestion_jobs (locked_at) WHERE status = 'RUNNING';

CREATE TABLE chunks (
    id                uuid PRIMARY KEY,
    document_id       uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    knowledge_base_id uuid NOT NULL,
    ordinal           integer NOT NULL,
    content           text NOT NULL,
    token_count       integer NOT NULL,
    heading_path      text[] NOT NULL DEFAULT '{}',
    locator           jsonb NOT NULL DEFAULT '{}'::jsonb,
    metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
    UNIQUE (document_id, ordinal)
);

CREATE TABLE document_assets (
    id                uuid PRIMARY KEY,
    document_id       uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    knowledge_base_id uuid NOT NULL,
    object_key        text NOT NULL,
    mime_type         text NOT NULL,
    size_bytes        bigint NOT NULL,
    page              integer,
    description       text NOT NULL DEFAULT '',
    locator_key       text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX document_assets_document_idx ON document_assets (document_id);

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    prefix       text NOT NULL UNIQUE,
    key_hash     text NOT NULL,
    is_admin     boolean NOT NULL DEFAULT false,
    scopes       jsonb NOT NULL DEFAULT '[]'::jsonb,  -- [{"knowledge_base_id": ..., "role": "reader"|"editor"}]
    description  text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz
);

-- embeddings by (model, sha256 of the passage text): unchanged chunks are never embedded twice
CREATE TABLE embedding_cache (
    model       text NOT NULL,
    text_hash   bytea NOT NULL,
    embedding   vector NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, text_hash)
);
