-- Who did what: every change made through the API, with the key prefix that made it.

CREATE TABLE audit_log (
    id                bigserial PRIMARY KEY,
    at                timestamptz NOT NULL DEFAULT now(),
    key_prefix        text NOT NULL,
    action            text NOT NULL,
    knowledge_base_id uuid,
    document_id       uuid,
    detail            jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC, id DESC);
CREATE INDEX audit_log_kb_idx ON audit_log (knowledge_base_id, at DESC);

ALTER TABLE api_keys ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
