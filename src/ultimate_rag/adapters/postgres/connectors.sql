-- Connectors and their syncs (SPEC §9). Loaded by name ("-- name --" headers). Lock order, as
-- everywhere: the sync row, then a document's job row, then the document row.

-- enqueue_scheduled --
-- Connectors whose schedule is due get a queued sync (none when one is queued or running already:
-- the partial unique index refuses it) and their next due time moves on by their interval.
WITH due AS (
    SELECT c.id, c.knowledge_base_id, c.schedule_seconds
    FROM connectors c JOIN knowledge_bases kb ON kb.id = c.knowledge_base_id
    WHERE c.next_sync_at <= now() AND c.schedule_seconds IS NOT NULL AND NOT kb.deleting
    ORDER BY c.next_sync_at
    LIMIT 50
    FOR UPDATE OF c SKIP LOCKED
), bumped AS (
    UPDATE connectors c SET next_sync_at = now() + make_interval(secs => due.schedule_seconds)
    FROM due WHERE c.id = due.id
    RETURNING c.id
), inserted AS (
    INSERT INTO connector_syncs (id, connector_id, knowledge_base_id, trigger, status, max_attempts)
    SELECT gen_random_uuid(), due.id, due.knowledge_base_id, 'schedule', 'PENDING', %(max_attempts)s FROM due
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT (SELECT count(*) FROM inserted) AS queued, (SELECT count(*) FROM bumped) AS due;

-- expired_exhausted --
-- Syncs whose worker stopped heartbeating with no attempt left: they end FAILED (with their
-- documents still being fetched), never stay RUNNING.
SELECT id FROM connector_syncs
WHERE status = 'RUNNING' AND attempts >= max_attempts
  AND locked_at <= now() - make_interval(secs => %(lease_seconds)s)
ORDER BY locked_at
LIMIT 20
FOR UPDATE SKIP LOCKED;

-- claim --
-- One sync: a due queued one, or a running one whose lease expired (its worker died or hung; the
-- new attempt resumes it). Attempts are counted here.
WITH due AS (
    SELECT id, available_at, created_at FROM connector_syncs
    WHERE status = 'PENDING' AND available_at <= now() AND attempts < max_attempts
    ORDER BY available_at, created_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), abandoned AS (
    SELECT id, available_at, created_at FROM connector_syncs
    WHERE status = 'RUNNING' AND locked_at <= now() - make_interval(secs => %(lease_seconds)s)
      AND attempts < max_attempts
    ORDER BY locked_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), candidate AS (
    SELECT id FROM (SELECT * FROM due UNION ALL SELECT * FROM abandoned) both_sources
    ORDER BY available_at, created_at
    LIMIT 1
)
UPDATE connector_syncs s
SET status = 'RUNNING', attempts = s.attempts + 1, locked_by = %(worker_id)s, locked_at = now(),
    started_at = coalesce(s.started_at, now()), updated_at = now()
FROM candidate c
WHERE s.id = c.id
RETURNING s.id, s.connector_id, s.knowledge_base_id, s.attempts, s.max_attempts;

-- lock_owned_sync --
-- Fencing: the sync is still ours (RUNNING, locked by us, at the attempt we claimed); renewed.
UPDATE connector_syncs SET locked_at = now()
WHERE id = %(sync_id)s AND status = 'RUNNING' AND locked_by = %(worker_id)s AND attempts = %(attempt)s
RETURNING id;

-- record_item --
-- One item's outcome: its counter goes up, its error (if any) is kept (the first 200).
UPDATE connector_syncs
SET counts = counts || jsonb_build_object(%(outcome)s::text, coalesce((counts ->> %(outcome)s::text)::int, 0) + 1),
    errors = CASE WHEN %(error)s::text IS NULL OR jsonb_array_length(errors) >= 200 THEN errors
                  ELSE errors || jsonb_build_array(jsonb_build_object(
                      'external_id', %(external_id)s::text, 'error', %(error)s::text, 'at', now())) END,
    updated_at = now()
WHERE id = %(sync_id)s;

-- set_count --
UPDATE connector_syncs SET counts = counts || jsonb_build_object(%(name)s::text, %(value)s::int), updated_at = now()
WHERE id = %(sync_id)s;

-- end_sync --
UPDATE connector_syncs
SET status = %(status)s, error = %(error)s, locked_by = NULL, locked_at = NULL, finished_at = now(), updated_at = now()
WHERE id = %(sync_id)s;

-- retry_sync --
UPDATE connector_syncs
SET status = 'PENDING', error = %(error)s, locked_by = NULL, locked_at = NULL, updated_at = now(),
    available_at = now() + make_interval(secs => %(delay)s)
WHERE id = %(sync_id)s;

-- release_sync --
-- Graceful shutdown: hand the sync back without burning the attempt (its next run resumes it).
UPDATE connector_syncs
SET status = 'PENDING', attempts = greatest(attempts - 1, 0), available_at = now(),
    locked_by = NULL, locked_at = NULL, updated_at = now()
WHERE id = %(sync_id)s;

-- lock_left_in_intake_jobs --
-- The jobs of documents a sync left in intake (FETCHING: new items; UPLOADING: new bytes for an
-- existing one), locked before their documents (the lock order). %(sources)s: the intake statuses
-- a document may fail from (status.INTAKE_FAILURE_SOURCES).
SELECT j.document_id FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id
WHERE d.connector_sync_id = %(sync_id)s AND d.status = ANY(%(sources)s)
ORDER BY j.document_id
FOR UPDATE OF j;

-- fail_left_in_intake --
-- %(sources)s as above; %(job_sources)s: the job statuses a job may fail from (status.job_sources_of).
WITH docs AS (
    SELECT id FROM documents
    WHERE id = ANY(%(ids)s) AND connector_sync_id = %(sync_id)s AND status = ANY(%(sources)s)
    ORDER BY id FOR UPDATE
), jobs AS (
    UPDATE ingestion_jobs j
    SET status = 'FAILED', locked_by = NULL, locked_at = NULL, finished_at = now(), updated_at = now(),
        last_error = %(message)s, error_history = j.error_history || jsonb_build_array(jsonb_build_object(
            'attempt', j.attempts, 'at', now(), 'error', %(message)s::text))
    FROM docs WHERE j.document_id = docs.id AND j.status = ANY(%(job_sources)s)
    RETURNING j.document_id
)
UPDATE documents d
SET status = 'FAILED', error_message = %(message)s, progress = '{}'::jsonb, updated_at = now()
FROM docs WHERE d.id = docs.id
RETURNING d.id;

-- find_item --
SELECT d.id, d.status, d.sha256, d.object_key, d.content_revision, d.remote_etag, d.remote_last_modified,
       d.connector_sync_id, d.filename
FROM documents d
WHERE d.knowledge_base_id = %(kb)s AND d.connector_id = %(connector_id)s AND d.external_id = %(external_id)s;

-- connector_items_not_in --
-- Documents of this connector whose remote item was not discovered by this sync (an anti-join on
-- the discovered ids, which the planner can hash: tens of thousands of items stay cheap).
SELECT d.id, d.external_id, d.status, d.connector_sync_id
FROM documents d
LEFT JOIN unnest(%(seen)s::text[]) AS seen(external_id) ON seen.external_id = d.external_id
WHERE d.knowledge_base_id = %(kb)s AND d.connector_id = %(connector_id)s AND d.status <> 'DELETED'
  AND seen.external_id IS NULL
ORDER BY d.id;

-- kb_deleting --
-- Held FOR SHARE while a sync creates a document: a knowledge-base delete waits for it to commit.
SELECT deleting FROM knowledge_bases WHERE id = %(kb)s FOR SHARE;

-- insert_item_document --
-- A new remote item's document, FETCHING until its bytes are stored; nothing when the item's
-- document exists already (another sync made it meanwhile).
INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key,
                       status, source, stage_timings, connector_id, external_id, connector_sync_id)
VALUES (%(id)s, %(kb)s, %(filename)s, 'application/octet-stream', 0, '', '', 'FETCHING', %(source)s,
        jsonb_build_object('FETCHING', now()), %(connector_id)s, %(external_id)s, %(sync_id)s)
ON CONFLICT (knowledge_base_id, connector_id, external_id) WHERE connector_id IS NOT NULL
DO NOTHING RETURNING id;

-- insert_idle_job --
-- The new document's single job, idle: nothing may claim it until its bytes are stored.
INSERT INTO ingestion_jobs (id, document_id, status, max_attempts)
VALUES (%(id)s, %(document_id)s, %(status)s, %(max_attempts)s);

-- begin_refetch --
-- New bytes for a stable document: the re-upload edge (checked in Python before).
UPDATE documents SET status = 'UPLOADING', error_message = NULL, progress = '{}'::jsonb,
    connector_sync_id = %(sync_id)s, updated_at = now()
WHERE id = %(id)s;

-- item_by_id --
SELECT id, status, sha256, object_key, content_revision, remote_etag, remote_last_modified,
       connector_sync_id, filename
FROM documents WHERE id = %(id)s;

-- finish_item --
-- FETCHING | UPLOADING -> PENDING with the fetched bytes recorded; the job is queued beside it. The
-- metadata's fetched keys (%(fetched_keys)s: s3, source) become what this fetch found, the user's
-- keys untouched; source gains the item's path.
UPDATE documents SET object_key = %(object_key)s, filename = %(filename)s, mime_type = %(mime_type)s,
    size_bytes = %(size_bytes)s, sha256 = %(sha256)s, content_revision = %(revision)s,
    remote_etag = %(etag)s, remote_last_modified = %(last_modified)s, status = 'PENDING',
    metadata = (metadata - %(fetched_keys)s::text[]) || %(fields)s::jsonb, source = source || %(source)s::jsonb,
    error_message = NULL, progress = '{}'::jsonb, duplicate_of = NULL, deleted_at = NULL,
    stage_timings = jsonb_build_object('PENDING', now()), updated_at = now()
WHERE id = %(id)s;

-- fail_item_job --
-- The item's job fails with the reason, from the statuses the job table allows (%(sources)s).
UPDATE ingestion_jobs SET status = 'FAILED', locked_by = NULL, locked_at = NULL, finished_at = now(),
    updated_at = now(), last_error = %(e)s,
    error_history = error_history || jsonb_build_array(
        jsonb_build_object('attempt', attempts, 'at', now(), 'error', %(e)s::text))
WHERE document_id = %(id)s AND status = ANY(%(sources)s);

-- fail_item_document --
UPDATE documents SET status = 'FAILED', error_message = %(e)s, progress = '{}'::jsonb, updated_at = now()
WHERE id = %(id)s;

-- mark_seen --
-- An unchanged item: remember what the remote said and that this sync handled it.
UPDATE documents SET connector_sync_id = %(sync_id)s, remote_etag = coalesce(%(etag)s, remote_etag),
    remote_last_modified = coalesce(%(last_modified)s, remote_last_modified)
WHERE id = %(id)s;

-- queue_item_document --
-- A stable document queued again: 'ingest' restores a soft-deleted one, 'delete' soft-deletes it.
-- A delete unpublishes at once; an ingest of a published document is a new revision, built beside
-- the one search serves (SPEC §4 rule 3).
UPDATE documents SET status = 'PENDING', progress = '{}'::jsonb, error_message = NULL, duplicate_of = NULL,
    connector_sync_id = %(sync_id)s, stage_timings = jsonb_build_object('PENDING', now()),
    published_revision = CASE WHEN %(operation)s = 'delete' THEN NULL ELSE published_revision END,
    content_revision = content_revision
        + CASE WHEN %(operation)s = 'ingest' AND published_revision IS NOT NULL THEN 1 ELSE 0 END,
    deleted_at = CASE WHEN %(operation)s = 'ingest' THEN NULL ELSE deleted_at END, updated_at = now()
WHERE id = %(id)s;

-- item_sync_id --
SELECT connector_sync_id FROM documents WHERE id = %(id)s;

-- lock_kb_for_connectors --
-- NO KEY UPDATE: two creates in one knowledge base take turns, so the connector count holds.
SELECT deleting FROM knowledge_bases WHERE id = %(kb)s FOR NO KEY UPDATE;

-- count_connectors --
SELECT count(*) AS n FROM connectors WHERE knowledge_base_id = %(kb)s;

-- insert_connector --
-- A scheduled connector is due at once: its first sync runs on the next scheduler pass.
INSERT INTO connectors (id, knowledge_base_id, kind, name, config, schedule_seconds, next_sync_at)
VALUES (%(id)s, %(kb)s, %(kind)s, %(name)s, %(config)s, %(schedule)s,
        CASE WHEN %(schedule)s::int IS NULL THEN NULL ELSE now() END)
RETURNING *;

-- get_connector --
SELECT * FROM connectors WHERE id = %(id)s AND knowledge_base_id = %(kb)s;

-- load_connector --
SELECT * FROM connectors WHERE id = %(id)s;

-- list_connectors --
SELECT * FROM connectors WHERE knowledge_base_id = %(kb)s ORDER BY created_at, id;

-- update_connector --
-- A NULL name or config keeps the current one; the schedule changes only when %(schedule_given)s,
-- and a new schedule is next due one period from now (none when it is cleared).
UPDATE connectors SET updated_at = now(),
    name = coalesce(%(name)s::text, name),
    config = coalesce(%(config)s::jsonb, config),
    schedule_seconds = CASE WHEN %(schedule_given)s THEN %(schedule)s::int ELSE schedule_seconds END,
    next_sync_at = CASE WHEN NOT %(schedule_given)s THEN next_sync_at
                        WHEN %(schedule)s::int IS NULL THEN NULL
                        ELSE now() + make_interval(secs => %(schedule)s::int) END
WHERE id = %(id)s AND knowledge_base_id = %(kb)s
RETURNING *;

-- lock_connector --
SELECT id FROM connectors WHERE id = %(id)s AND knowledge_base_id = %(kb)s FOR UPDATE;

-- delete_connector --
DELETE FROM connectors WHERE id = %(id)s;

-- connector_kb_deleting --
-- FOR SHARE OF kb: a knowledge-base delete waits until the requested sync is committed (and then
-- aborts it with the others).
SELECT kb.deleting FROM connectors c JOIN knowledge_bases kb ON kb.id = c.knowledge_base_id
WHERE c.id = %(id)s AND c.knowledge_base_id = %(kb)s FOR SHARE OF kb;

-- insert_sync --
-- A unique index allows one queued or running sync per connector: a second raises UniqueViolation.
INSERT INTO connector_syncs (id, connector_id, knowledge_base_id, trigger, status, max_attempts)
VALUES (%(id)s, %(connector_id)s, %(kb)s, %(trigger)s, 'PENDING', %(max_attempts)s)
RETURNING *;

-- lock_active_sync --
SELECT * FROM connector_syncs WHERE connector_id = %(connector_id)s AND status = ANY(%(statuses)s) FOR UPDATE;

-- get_sync --
SELECT * FROM connector_syncs WHERE id = %(id)s;

-- list_syncs --
SELECT * FROM connector_syncs WHERE connector_id = %(connector_id)s ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;
