-- Document change events. Loaded by name ("-- name --" headers). {channel} is events.CHANNEL, the
-- channel migration 0003's documents trigger notifies (an identifier, composed in Python); the
-- hub's connection shows in pg_stat_activity by its application name (events.APPLICATION_NAME).

-- listen --
LISTEN {channel};

-- register --
-- The hub listens (migration 0018): the trigger notifies while a registration has not expired.
-- Also the refresh of a registration; registrations long expired (a hub that died) are removed.
WITH expired AS (
    DELETE FROM document_event_listeners WHERE expires_at < now() - interval '1 hour'
)
INSERT INTO document_event_listeners (id, expires_at) VALUES (%(id)s, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at;

-- writers_settled --
-- After the registration committed: wait until every writer that may have read "nobody listens"
-- has committed (they hold the events lock shared until then; held here only for this statement).
SELECT pg_advisory_xact_lock(ultimate_rag_document_events_lock());

-- unregister --
DELETE FROM document_event_listeners WHERE id = %(id)s;
