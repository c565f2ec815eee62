-- The migration runner's bookkeeping (migrations.py); the migrations themselves are the numbered
-- files in migrations/. %(lock)s: the runner's advisory lock key.

-- lock --
SELECT pg_advisory_lock(%(lock)s);

-- unlock --
SELECT pg_advisory_unlock(%(lock)s);

-- create_schema_migrations --
CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());

-- applied_versions --
SELECT version FROM schema_migrations;

-- record_migration --
INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s);

-- current_version --
SELECT max(version) FROM schema_migrations;
