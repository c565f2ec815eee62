-- The job queue's SQL, in one place (SPEC §4). Loaded by name: each query starts with a
-- "-- name --" header line.

-- claim --
-- One statement, one round trip. First, jobs whose lease expired with no attempts left reach a
-- terminal state (document already READY -> SUCCEEDED; otherwise job and document FAILED). Then
-- up to %(limit)s jobs are claimed: due PENDING ones, and RUNNING ones whose lease expired (their
-- worker died or hung); attempts are counted here. A reclaimed job's document goes back to
-- PENDING so the new attempt walks the stages from the start. The converged and the claimed jobs
-- are disjoint (attempts >= max_attempts vs attempts < max_attempts).
-- Re-uploads whose lease expired (the API died, or its commit failed and could not be undone,
-- between UPLOADING and queuing) are converged here too: the new bytes were never recorded (that
-- commit also leaves UPLOADING), so the document goes back to the stable status and error message
-- it had, with its previous revision; the unrecorded object is the janitor's. Locked with SKIP
-- LOCKED, so a claim never waits on an API that is finishing its upload right now.
WITH expired AS (
    SELECT j.id, j.document_id
    FROM ingestion_jobs j
    WHERE j.status = 'RUNNING'
      AND j.attempts >= j.max_attempts
      AND j.locked_at <= now() - make_interval(secs => %(lease_seconds)s)
    ORDER BY j.locked_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
), expired_docs AS (
    SELECT d.id, d.status FROM documents d JOIN expired e ON e.document_id = d.id FOR UPDATE OF d
), converged AS (
    UPDATE ingestion_jobs j
    SET status = CASE WHEN x.status IN ('READY', 'DELETED') THEN 'SUCCEEDED' ELSE 'FAILED' END,
        locked_by = NULL, locked_at = NULL, finished_at = now(), updated_at = now(),
        last_error = CASE WHEN x.status IN ('READY', 'DELETED') THEN j.last_error ELSE %(message)s END,
        error_history = CASE WHEN x.status IN ('READY', 'DELETED') THEN j.error_history
            ELSE j.error_history || jsonb_build_array(jsonb_build_object(
                'attempt', j.attempts, 'at', now(), 'error', %(message)s::text)) END
    FROM expired e JOIN expired_docs x ON x.id = e.document_id
    WHERE j.id = e.id
    RETURNING j.document_id, j.status
), converged_docs AS (
    UPDATE documents d
    SET status = 'FAILED', error_message = %(message)s, updated_at = now(), progress = '{}'::jsonb
    FROM converged c
    WHERE d.id = c.document_id AND c.status = 'FAILED'
    RETURNING d.id
), stale_uploads AS (
    SELECT d.id FROM documents d
    WHERE d.status = 'UPLOADING' AND d.upload_expires_at <= now()
    ORDER BY d.upload_expires_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
), restored_uploads AS (
    UPDATE documents d
    SET status = CASE WHEN d.upload_lease->>'status' = ANY(%(restorable)s) THEN d.upload_lease->>'status'
                      ELSE 'FAILED' END,
        error_message = CASE WHEN d.upload_lease->>'status' = ANY(%(restorable)s)
                             THEN d.upload_lease->>'error_message' ELSE %(upload_message)s END,
        upload_expires_at = NULL, upload_lease = NULL, progress = '{}'::jsonb, updated_at = now()
    FROM stale_uploads s
    WHERE d.id = s.id
    RETURNING d.id
), due AS (
    -- each source is read in index order with its own LIMIT, so a claim costs the same with
    -- ten queued jobs or a million (an OR of both would sort every due row on each claim)
    SELECT id, status AS previous_status, available_at, created_at
    FROM ingestion_jobs
    WHERE status = 'PENDING' AND available_at <= now() AND attempts < max_attempts
    ORDER BY available_at, created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), abandoned AS (
    SELECT id, status AS previous_status, available_at, created_at
    FROM ingestion_jobs
    WHERE status = 'RUNNING' AND locked_at <= now() - make_interval(secs => %(lease_seconds)s)
      AND attempts < max_attempts
    ORDER BY locked_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), candidates AS (
    SELECT id, previous_status FROM (SELECT * FROM due UNION ALL SELECT * FROM abandoned) both_sources
    ORDER BY available_at, created_at
    LIMIT %(limit)s
), claimed AS (
    UPDATE ingestion_jobs j
    SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = %(worker_id)s,
        locked_at = now(), updated_at = now()
    FROM candidates c
    WHERE j.id = c.id
    RETURNING j.id, j.document_id, j.attempts, j.max_attempts, j.operation, j.force, c.previous_status
), restarted AS (
    UPDATE documents d SET status = 'PENDING', updated_at = now()
    FROM claimed c
    WHERE d.id = c.document_id AND c.previous_status = 'RUNNING'
      AND d.status IN ('PARSING', 'CHUNKING', 'EMBEDDING', 'INDEXING', 'DELETING')
    RETURNING d.id
)
SELECT c.*, (SELECT count(*) FROM converged_docs) AS converged_failed,
       (SELECT count(*) FROM restarted) AS restarted, (SELECT count(*) FROM restored_uploads) AS restored_uploads
FROM claimed c;

-- fenced_document_update --
-- Fencing in one statement: lock the job row only if it is still ours (RUNNING, locked_by = me,
-- attempts = my attempt; re-checked after any concurrent update), renew the lease, then update
-- the document if its current status may move to the new one. Job row first, document second:
-- the lock order used everywhere. {assignments} is a constant SQL fragment from queue.py.
WITH owned AS (
    SELECT id FROM ingestion_jobs
    WHERE id = %(job_id)s AND status = 'RUNNING' AND locked_by = %(worker_id)s AND attempts = %(attempt)s
    FOR UPDATE
), renewed AS (
    UPDATE ingestion_jobs j SET locked_at = now() FROM owned o WHERE j.id = o.id RETURNING j.id
)
UPDATE documents d
SET {assignments}, updated_at = now()
FROM renewed
WHERE d.id = %(document_id)s AND d.status = ANY(%(from_statuses)s)
RETURNING d.id;

-- complete_ready_job --
-- ``complete`` for a document that is READY already: the job ends only if it is still ours.
WITH owned AS (
    SELECT id FROM ingestion_jobs
    WHERE id = %(job_id)s AND status = 'RUNNING' AND locked_by = %(worker_id)s AND attempts = %(attempt)s
    FOR UPDATE
)
UPDATE ingestion_jobs j
SET status = 'SUCCEEDED', locked_by = NULL, locked_at = NULL, updated_at = now(), finished_at = now()
FROM owned o
WHERE j.id = o.id AND EXISTS (SELECT 1 FROM documents d WHERE d.id = %(document_id)s AND d.status = 'READY')
RETURNING j.id;

-- fencing_state --
-- Why a fenced statement changed nothing: is the job still ours, and where is the document?
SELECT (j.status = 'RUNNING' AND j.locked_by = %(worker_id)s AND j.attempts = %(attempt)s) AS owned,
       d.status AS document_status
FROM ingestion_jobs j LEFT JOIN documents d ON d.id = j.document_id
WHERE j.id = %(job_id)s;

-- lock_owned_job --
-- Fencing: the job is still ours (RUNNING, locked by us, at the attempt we claimed).
SELECT id FROM ingestion_jobs
WHERE id = %(job_id)s AND status = 'RUNNING' AND locked_by = %(worker_id)s AND attempts = %(attempt)s
FOR UPDATE;

-- heartbeat --
UPDATE ingestion_jobs SET locked_at = now()
WHERE id = %(job_id)s AND status = 'RUNNING' AND locked_by = %(worker_id)s AND attempts = %(attempt)s
RETURNING id;

-- retry_job --
UPDATE ingestion_jobs
SET status = 'PENDING', available_at = now() + make_interval(secs => %(delay)s),
    locked_by = NULL, locked_at = NULL, updated_at = now(), last_error = %(error)s,
    error_history = error_history || jsonb_build_array(jsonb_build_object(
        'attempt', attempts, 'at', now(), 'error', %(error)s::text, 'retry_in_seconds', %(delay)s::float8))
WHERE id = %(job_id)s;

-- fail_job --
UPDATE ingestion_jobs
SET status = 'FAILED', locked_by = NULL, locked_at = NULL, updated_at = now(), finished_at = now(),
    last_error = %(error)s,
    error_history = error_history || jsonb_build_array(jsonb_build_object(
        'attempt', attempts, 'at', now(), 'error', %(error)s::text))
WHERE id = %(job_id)s;

-- succeed_job --
UPDATE ingestion_jobs
SET status = 'SUCCEEDED', locked_by = NULL, locked_at = NULL, updated_at = now(), finished_at = now()
WHERE id = %(job_id)s;

-- release_job --
-- Graceful shutdown: hand the job back without burning the attempt it was claimed with.
UPDATE ingestion_jobs
SET status = 'PENDING', attempts = greatest(attempts - 1, 0), available_at = now(),
    locked_by = NULL, locked_at = NULL, updated_at = now()
WHERE id = %(job_id)s;
