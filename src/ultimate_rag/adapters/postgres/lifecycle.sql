-- Operator and user operations on documents (lifecycle.py), and a knowledge base's deletion.
-- Loaded by name: each query starts with a "-- name --" header line.

-- lock_job --
-- The lock order used everywhere: the job row first, then the document row.
SELECT id, status, operation, force FROM ingestion_jobs WHERE document_id = %(id)s FOR UPDATE;

-- lock_document --
SELECT status, knowledge_base_id, object_key, content_revision, upload_lease
FROM documents WHERE id = %(id)s FOR UPDATE;

-- cancel_job --
-- An operator's fail: the job ends FAILED (from the statuses the job table allows, %(job_from)s)
-- and a worker still on it loses its lease (fencing).
UPDATE ingestion_jobs SET status = 'FAILED', locked_by = NULL, locked_at = NULL, finished_at = now(),
    updated_at = now(), last_error = %(message)s, error_history = error_history || jsonb_build_array(
        jsonb_build_object('attempt', attempts, 'at', now(), 'error', %(message)s::text))
WHERE document_id = %(id)s AND status = ANY(%(job_from)s);

-- cancel_document --
-- (checked against the transition table under the row lock) a published revision keeps serving,
-- and the message says so (%(still_served)s: a format() pattern).
UPDATE documents SET status = 'FAILED', progress = '{}'::jsonb,
    error_message = %(message)s || CASE WHEN published_revision IS NOT NULL
                                        THEN format(%(still_served)s, published_revision) ELSE '' END,
    upload_expires_at = NULL, upload_lease = NULL, updated_at = now()
WHERE id = %(id)s;

-- begin_upload --
-- Re-upload, step 1: UPLOADING under a lease (its expiry, this upload's token, and the status and
-- error message to restore if the new bytes never commit).
UPDATE documents SET status = 'UPLOADING', error_message = NULL, progress = '{}'::jsonb,
    upload_expires_at = now() + make_interval(secs => %(lease)s),
    upload_lease = jsonb_build_object('token', %(token)s::text, 'status', status, 'error_message', error_message),
    updated_at = now()
WHERE id = %(id)s;

-- record_upload --
-- Re-upload, step 2: the new source recorded (the document is queued next, in the same transaction).
UPDATE documents SET object_key = %(object_key)s, filename = %(filename)s, mime_type = %(mime_type)s,
    size_bytes = %(size_bytes)s, sha256 = %(sha256)s, content_revision = %(revision)s,
    upload_expires_at = NULL, upload_lease = NULL
WHERE id = %(id)s;

-- restore_upload --
-- A re-upload whose bytes were never recorded: back to the status and message it had.
UPDATE documents SET status = %(status)s, error_message = %(error_message)s, upload_expires_at = NULL,
    upload_lease = NULL, updated_at = now()
WHERE id = %(id)s;

-- queue_document --
-- (checked against the transition table under the row lock) A delete unpublishes at once (SPEC §4
-- rule 3); a rebuild (%(bump)s) of a document with a published revision is a new revision, built
-- beside the published one; with nothing published there is nothing to keep beside, and the
-- revision (so the chunk ids) stays the same. A reindexed OUTDATED document is not outdated again
-- against the same twin (SPEC §8); a reindex restores a deleted one.
UPDATE documents SET status = 'PENDING', progress = '{}'::jsonb, updated_at = now(),
    published_revision = CASE WHEN %(operation)s = 'delete' THEN NULL ELSE published_revision END,
    content_revision = content_revision + CASE WHEN %(bump)s AND published_revision IS NOT NULL THEN 1 ELSE 0 END,
    dedup_exempt = CASE WHEN status = 'OUTDATED' AND duplicate_of IS NOT NULL
        THEN array_append(dedup_exempt, duplicate_of) ELSE dedup_exempt END,
    error_message = NULL, duplicate_of = NULL, stage_timings = jsonb_build_object('PENDING', now()),
    deleted_at = CASE WHEN %(operation)s = 'ingest' THEN NULL ELSE deleted_at END
WHERE id = %(id)s;

-- queue_batch --
-- Set-based queue_document, for a bulk reindex and a knowledge base's deletion: the next batch of
-- a knowledge base's documents by id (%(after)s, %(n)s), each job row locked first, then its
-- document row. Of these, the documents in %(statuses)s that the operation accepts (%(accepted)s,
-- from domain/operations.py) and the transition tables let go to PENDING (%(from_statuses)s and
-- %(job_from)s, from status.sources_of and job_sources_of) and, with %(parsers)s, whose parser is
-- not current, get a %(operation)s job (%(force)s) and change as queue_document changes one, marked
-- %(started)s (a bulk reindex's rebuild_started_at); the workers are woken. Returns the batch's
-- last id, how many were queued, and how many the operation refused (skipped).
WITH batch AS (
    SELECT id FROM documents
    WHERE knowledge_base_id = %(kb)s AND id > %(after)s
    ORDER BY id LIMIT %(n)s
), jobs AS (
    SELECT j.document_id FROM ingestion_jobs j JOIN batch b ON b.id = j.document_id
    ORDER BY j.document_id FOR UPDATE OF j
), docs AS (
    SELECT d.id, d.status, d.parser_name, d.parser_version
    FROM documents d JOIN jobs ON jobs.document_id = d.id
    ORDER BY d.id FOR UPDATE OF d
), eligible AS (
    -- each its turn in the knowledge base's operations flow, one after the other (queue_turn)
    SELECT id, queue_turn(%(kb)s::text || '/') + row_number() OVER (ORDER BY id) - 1 AS turn FROM docs
    WHERE status = ANY(%(statuses)s) AND status = ANY(%(accepted)s) AND status = ANY(%(from_statuses)s)
      AND (%(parsers)s::text[] IS NULL
           OR (parser_name IS NOT NULL AND parser_name || ':' || parser_version <> ALL(%(parsers)s::text[])))
), reset AS (
    UPDATE ingestion_jobs j
    SET status = 'PENDING', operation = %(operation)s, force = %(force)s, attempts = 0,
        max_attempts = %(max_attempts)s, available_at = now(), locked_by = NULL, locked_at = NULL,
        last_error = NULL, finished_at = NULL, queued_at = now(), lost_streak = 0, lost_workers = '{}',
        lost_since = NULL, updated_at = now(), flow = %(kb)s::text || '/', turn = e.turn
    FROM eligible e WHERE j.document_id = e.id AND j.status = ANY(%(job_from)s)
    RETURNING j.document_id
), queued AS (
    UPDATE documents d
    SET status = 'PENDING', progress = '{}'::jsonb, error_message = NULL, duplicate_of = NULL,
        published_revision = CASE WHEN %(operation)s = 'delete' THEN NULL ELSE d.published_revision END,
        content_revision = d.content_revision
            + CASE WHEN %(bump)s AND d.published_revision IS NOT NULL THEN 1 ELSE 0 END,
        dedup_exempt = CASE WHEN d.status = 'OUTDATED' AND d.duplicate_of IS NOT NULL
            THEN array_append(d.dedup_exempt, d.duplicate_of) ELSE d.dedup_exempt END,
        deleted_at = CASE WHEN %(operation)s = 'ingest' THEN NULL ELSE d.deleted_at END,
        rebuild_started_at = coalesce(%(started)s, d.rebuild_started_at),
        stage_timings = jsonb_build_object('PENDING', now()), updated_at = now()
    FROM reset r WHERE d.id = r.document_id
    RETURNING d.id
), notified AS (
    SELECT pg_notify(%(jobs_channel)s, '') WHERE EXISTS (SELECT 1 FROM queued)
)
SELECT (SELECT max(id::text)::uuid FROM batch) AS last_id,
       (SELECT count(*) FROM queued) AS queued,
       (SELECT count(*) FROM docs WHERE status <> ALL(%(accepted)s)) AS skipped,
       (SELECT count(*) FROM notified) AS woke;

-- start_rebuild --
-- A new bulk reindex, still queueing its batches (rebuild_queued_at NULL until queued_rebuild).
UPDATE knowledge_bases SET rebuild_started_at = clock_timestamp(), rebuild_queued_at = NULL
WHERE id = %(kb)s RETURNING rebuild_started_at;

-- queued_rebuild --
-- Its last batch is queued: from now on, nothing pending means finished.
UPDATE knowledge_bases SET rebuild_queued_at = clock_timestamp()
WHERE id = %(kb)s AND rebuild_started_at = %(started)s;

-- rebuild_progress --
-- The documents the last bulk reindex queued: how many are rebuilt (READY), still on their way (not
-- stable: %(stable)s), failed (their previous revision, if any, still serving) and removed since;
-- and whether it is still queueing them (its counts then still grow).
SELECT kb.rebuild_started_at AS started_at, kb.rebuild_queued_at IS NULL AS queuing, count(d.id) AS queued,
       count(d.id) FILTER (WHERE d.status = 'READY') AS rebuilt,
       count(d.id) FILTER (WHERE d.status <> ALL(%(stable)s)) AS pending,
       count(d.id) FILTER (WHERE d.status = 'FAILED') AS failed,
       count(d.id) FILTER (WHERE d.status IN ('DELETED', 'OUTDATED')) AS removed,
       count(d.id) FILTER (WHERE d.published_revision IS NOT NULL) AS searchable
FROM knowledge_bases kb
LEFT JOIN documents d ON d.knowledge_base_id = kb.id AND d.rebuild_started_at = kb.rebuild_started_at
WHERE kb.id = %(kb)s AND kb.rebuild_started_at IS NOT NULL
GROUP BY kb.rebuild_started_at, kb.rebuild_queued_at;

-- mark_kb_deleting --
UPDATE knowledge_bases SET deleting = true, updated_at = now() WHERE id = %(kb)s RETURNING id;

-- lock_deleting_kb --
SELECT id FROM knowledge_bases WHERE id = %(kb)s AND deleting FOR UPDATE;

-- kb_has_documents --
SELECT EXISTS (SELECT 1 FROM documents WHERE knowledge_base_id = %(kb)s) AS any;

-- delete_kb --
DELETE FROM knowledge_bases WHERE id = %(kb)s;
