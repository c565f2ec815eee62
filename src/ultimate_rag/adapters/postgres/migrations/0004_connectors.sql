-- Connectors (SPEC §9): a knowledge base pulls documents from URLs, a sitemap, an S3 prefix or a
-- server-side directory. Each sync is a row claimed through PostgreSQL with the same lease,
-- heartbeat and fencing rules as ingestion jobs, so one worker at a time runs a connector's sync.

CREATE TABLE connectors (
    id                uuid PRIMARY KEY,
    knowledge_base_id uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    kind              text NOT NULL,
    name              text NOT NULL DEFAULT '',
    config            jsonb NOT NULL DEFAULT '{}'::jsonb,
    schedule_seconds  integer,
    next_sync_at      timestamptz,   -- when the next scheduled sync is due (NULL: not scheduled)
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT connectors_kind_check CHECK (kind IN ('urls', 'sitemap', 's3', 'directory')),
    CONSTRAINT connectors_schedule_check CHECK (schedule_seconds IS NULL OR schedule_seconds > 0)
);
CREATE INDEX connectors_kb_idx ON connectors (knowledge_base_id, created_at);
CREATE INDEX connectors_due_idx ON connectors (next_sync_at) WHERE next_sync_at IS NOT NULL;

CREATE TABLE connector_syncs (
    id                uuid PRIMARY KEY,
    connector_id      uuid NOT NULL REFERENCES connectors (id) ON DELETE CASCADE,
    knowledge_base_id uuid NOT NULL,
    trigger           text NOT NULL DEFAULT 'manual',
    status            text NOT NULL,
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      integer NOT NULL,
    available_at      timestamptz NOT NULL DEFAULT now(),
    locked_by         text,
    locked_at         timestamptz,
    counts            jsonb NOT NULL DEFAULT '{}'::jsonb,
    errors            jsonb NOT NULL DEFAULT '[]'::jsonb,   -- [{external_id, error, at}], bounded
    error             text,                                 -- why the sync as a whole failed
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT connector_syncs_status_check CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'ABORTED')),
    CONSTRAINT connector_syncs_trigger_check CHECK (trigger IN ('manual', 'schedule')),
    CONSTRAINT connector_syncs_running_is_locked CHECK (status <> 'RUNNING' OR (locked_by IS NOT NULL AND locked_at IS NOT NULL))
);
-- at most one queued or running sync per connector
CREATE UNIQUE INDEX connector_syncs_active_key ON connector_syncs (connector_id) WHERE status IN ('PENDING', 'RUNNING');
CREATE INDEX connector_syncs_pending_idx ON connector_syncs (available_at, created_at) WHERE status = 'PENDING';
CREATE INDEX connector_syncs_running_idx ON connector_syncs (locked_at) WHERE status = 'RUNNING';
CREATE INDEX connector_syncs_history_idx ON connector_syncs (connector_id, created_at DESC, id DESC);

-- a document pulled by a connector: which connector and which remote item, what the remote said
-- about it (for conditional requests), and the sync that last handled it
ALTER TABLE documents ADD COLUMN connector_id uuid REFERENCES connectors (id) ON DELETE SET NULL;
ALTER TABLE documents ADD COLUMN external_id text;
ALTER TABLE documents ADD COLUMN remote_etag text;
ALTER TABLE documents ADD COLUMN remote_last_modified text;
ALTER TABLE documents ADD COLUMN connector_sync_id uuid;
CREATE UNIQUE INDEX documents_connector_item_key ON documents (knowledge_base_id, connector_id, external_id)
    WHERE connector_id IS NOT NULL;
CREATE INDEX documents_connector_sync_idx ON documents (connector_sync_id, status) WHERE connector_sync_id IS NOT NULL;
