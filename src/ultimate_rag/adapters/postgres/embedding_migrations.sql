-- Embedding-model migrations and their items (migration 0010). Items are leased like ingestion jobs
-- (SPEC §4); every write on an item's behalf after its claim is fenced on (RUNNING, locked_by,
-- attempts). Loaded by name ("-- name --" headers).

-- lock_knowledge_base --
-- Taken first in start(): a knowledge-base delete or a second start waits for this one.
SELECT settings, deleting FROM knowledge_bases WHERE id = %(kb)s FOR UPDATE;

-- running_for_kb --
SELECT 1 FROM embedding_migrations WHERE knowledge_base_id = %(kb)s AND status = 'RUNNING';

-- last_generation --
-- The highest generation any migration of the knowledge base targeted, finished or not: a new one
-- never reuses a generation whose tables may still exist.
SELECT coalesce(max((target->>'generation')::int), 0) AS g FROM embedding_migrations
WHERE knowledge_base_id = %(kb)s;

-- insert_migration --
INSERT INTO embedding_migrations (knowledge_base_id, source, target) VALUES (%(kb)s, %(source)s, %(target)s)
RETURNING id;

-- insert_items --
-- One item per document that may hold an index.
INSERT INTO embedding_migration_items (migration_id, document_id, max_attempts)
SELECT %(migration)s, id, %(max_attempts)s FROM documents
WHERE knowledge_base_id = %(kb)s AND status NOT IN ('DELETED', 'OUTDATED');

-- get --
SELECT * FROM embedding_migrations WHERE id = %(id)s;

-- latest --
SELECT * FROM embedding_migrations WHERE knowledge_base_id = %(kb)s ORDER BY id DESC LIMIT 1;

-- item_counts --
SELECT status, count(*) AS n FROM embedding_migration_items WHERE migration_id = %(id)s GROUP BY status;

-- item_failures --
SELECT document_id, last_error FROM embedding_migration_items
WHERE migration_id = %(id)s AND status = 'FAILED' ORDER BY id LIMIT 20;

-- chunk_totals --
SELECT coalesce(sum(chunks), 0) AS chunks, coalesce(sum(from_cache), 0) AS from_cache
FROM embedding_migration_items WHERE migration_id = %(id)s;

-- running_target --
SELECT id, target FROM embedding_migrations WHERE knowledge_base_id = %(kb)s AND status = 'RUNNING';

-- index_state --
-- The knowledge base's settings and the target of its running migration, in one read.
SELECT settings, migration_target, migration_id FROM knowledge_base_index_state WHERE knowledge_base_id = %(kb)s;

-- abort --
UPDATE embedding_migrations SET status = 'ABORTED', finished_at = now(), error_message = 'aborted by a user'
WHERE knowledge_base_id = %(kb)s AND status = 'RUNNING'
RETURNING id;

-- cancel_items --
UPDATE embedding_migration_items SET status = 'CANCELLED', locked_by = NULL, updated_at = now()
WHERE migration_id = %(id)s AND status IN ('PENDING', 'RUNNING');

-- requeue --
-- The item is made anew when the document is newer than the migration; a running item keeps its
-- lease and a cancelled one stays cancelled.
INSERT INTO embedding_migration_items (migration_id, document_id, max_attempts)
VALUES (%(migration)s, %(document)s, %(max_attempts)s)
ON CONFLICT (migration_id, document_id) DO UPDATE SET status = 'PENDING', attempts = 0,
    locked_by = NULL, available_at = now(), updated_at = now()
WHERE embedding_migration_items.status NOT IN ('RUNNING', 'CANCELLED');

-- converge --
-- A running item whose lease expired on its last attempt can never be claimed again: fail it.
UPDATE embedding_migration_items SET status = 'FAILED', last_error = %(msg)s, locked_by = NULL, updated_at = now()
WHERE status = 'RUNNING' AND attempts >= max_attempts AND locked_at <= now() - make_interval(secs => %(lease)s);

-- claim --
-- A due item of a running migration, or one whose lease expired, skipping rows another worker holds.
UPDATE embedding_migration_items i
SET status = 'RUNNING', attempts = i.attempts + 1, locked_by = %(worker)s, locked_at = now(), updated_at = now()
FROM embedding_migrations m
WHERE m.id = i.migration_id AND i.id = (
    SELECT c.id FROM embedding_migration_items c JOIN embedding_migrations cm ON cm.id = c.migration_id
    WHERE cm.status = 'RUNNING' AND c.attempts < c.max_attempts AND (
        (c.status = 'PENDING' AND c.available_at <= now())
     OR (c.status = 'RUNNING' AND c.locked_at <= now() - make_interval(secs => %(lease)s)))
    ORDER BY c.available_at, c.id LIMIT 1 FOR UPDATE OF c SKIP LOCKED)
RETURNING i.id, i.migration_id, i.document_id, i.attempts, i.max_attempts, m.knowledge_base_id;

-- heartbeat --
-- This and the item writes below are fenced on the lease: they touch one row or none.
UPDATE embedding_migration_items SET locked_at = now(), updated_at = now()
WHERE id = %(id)s AND status = 'RUNNING' AND locked_by = %(worker)s AND attempts = %(attempt)s;

-- finish --
UPDATE embedding_migration_items SET status = %(status)s, locked_by = NULL, chunks = %(chunks)s,
    from_cache = %(cached)s, last_error = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'RUNNING' AND locked_by = %(worker)s AND attempts = %(attempt)s;

-- defer --
-- The document is in the pipeline: try again later, without burning an attempt.
UPDATE embedding_migration_items SET status = 'PENDING', attempts = attempts - 1, locked_by = NULL,
    available_at = now() + make_interval(secs => %(s)s), updated_at = now()
WHERE id = %(id)s AND status = 'RUNNING' AND locked_by = %(worker)s AND attempts = %(attempt)s;

-- fail --
UPDATE embedding_migration_items SET status = 'FAILED', locked_by = NULL, last_error = %(e)s, updated_at = now()
WHERE id = %(id)s AND status = 'RUNNING' AND locked_by = %(worker)s AND attempts = %(attempt)s;

-- retry --
UPDATE embedding_migration_items SET status = 'PENDING', locked_by = NULL, last_error = %(e)s,
    available_at = now() + make_interval(secs => %(s)s), updated_at = now()
WHERE id = %(id)s AND status = 'RUNNING' AND locked_by = %(worker)s AND attempts = %(attempt)s;

-- lock_migration --
SELECT * FROM embedding_migrations WHERE id = %(id)s FOR UPDATE;

-- items_left --
SELECT count(*) FILTER (WHERE status IN ('PENDING', 'RUNNING')) AS todo,
       count(*) FILTER (WHERE status = 'FAILED') AS failed
FROM embedding_migration_items WHERE migration_id = %(id)s;

-- end_failed --
UPDATE embedding_migrations SET status = 'FAILED', finished_at = now(), error_message = %(msg)s
WHERE id = %(id)s;

-- switch_settings --
-- %(settings)s holds the target's embedder, model, dimension and index generation.
UPDATE knowledge_bases SET settings = settings || %(settings)s WHERE id = %(kb)s;

-- end_switched --
UPDATE embedding_migrations SET status = 'SWITCHED', finished_at = now() WHERE id = %(id)s;

-- document_status --
SELECT status FROM documents WHERE id = %(id)s;

-- document_chunks --
-- The chunks a migration item embeds again: the document's searchable ones (its published revision's).
SELECT c.id, c.document_id, c.ordinal, c.content, c.heading_path
FROM chunks c JOIN documents d ON d.id = c.document_id AND c.revision = d.published_revision
WHERE c.document_id = %(id)s ORDER BY c.ordinal;

-- running_ids --
SELECT id FROM embedding_migrations WHERE status = 'RUNNING';

-- to_drop --
-- Finished migrations whose losing generation is still there, past the grace period.
SELECT * FROM embedding_migrations
WHERE status <> 'RUNNING' AND dropped_at IS NULL AND finished_at <= now() - make_interval(secs => %(grace)s)
ORDER BY id;

-- mark_dropped --
UPDATE embedding_migrations SET dropped_at = now() WHERE id = %(id)s;

-- live_generations --
-- (knowledge base, generation) pairs that must not be swept: current, being built, or waiting for
-- their drop.
SELECT id AS kb, coalesce((settings->>'index_generation')::int, 0) AS g FROM knowledge_bases
UNION SELECT knowledge_base_id, (target->>'generation')::int FROM embedding_migrations
WHERE status = 'RUNNING' OR dropped_at IS NULL
UNION SELECT knowledge_base_id, (source->>'generation')::int FROM embedding_migrations
WHERE dropped_at IS NULL;
