-- The job queue's SQL, in one place (SPEC §4). Loaded by name: each query starts with a
-- "-- name --" header line.

-- converge_exhausted --
-- Jobs whose lease expired with no attempts left reach a terminal state before any claim:
-- document already READY -> SUCCEEDED; otherwise job and document FAILED.
WITH expired AS (
    SELECT j.id, j.document_id
    FROM ingestion_jobs j
    WHERE j.status = 'RUNNING'
      AND j.attempts >= j.max_attempts
      AND j.locked_at <= now() - make_interval(secs => %(lease_seconds)s)
    ORDER BY j.locked_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
), docs AS (
    SELECT d.id, d.status FROM documents d JOIN expired e ON e.document_id = d.id FOR UPDATE OF d
), jobs AS (
    UPDATE ingestion_jobs j
    SET status = CASE WHEN docs.status IN ('READY', 'DELETED') THEN 'SUCCEEDED' ELSE 'FAILED' END,
        locked_by = NULL, locked_at = NULL, finished_at = now(), updated_at = now(),
        last_error = CASE WHEN docs.status IN ('READY', 'DELETED') THEN j.last_error ELSE %(message)s END,
        error_history = CASE WHEN docs.status IN ('READY', 'DELETED') THEN j.error_history
            ELSE j.error_history || jsonb_build_array(jsonb_build_object(
                'attempt', j.attempts, 'at', now(), 'error', %(message)s::text)) END
    FROM expired e JOIN docs ON docs.id = e.document_id
    WHERE j.id = e.id
    RETURNING j.document_id, j.status
)
UPDATE documents d
SET status = 'FAILED', error_message = %(message)s, updated_at = now(), progress = '{}'::jsonb
FROM jobs
WHERE d.id = jobs.document_id AND jobs.status = 'FAILED'
RETURNING d.id;

-- claim --
-- Take up to %(limit)s jobs: due PENDING ones, and RUNNING ones whose lease expired (their
-- worker died or hung). Attempts are counted here, at claim time.
WITH candidates AS (
    SELECT id
    FROM ingestion_jobs
    WHERE attempts < max_attempts
      AND ((status = 'PENDING' AND available_at <= now())
        OR (status = 'RUNNING' AND locked_at <= now() - make_interval(secs => %(lease_seconds)s)))
    ORDER BY available_at, created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE ingestion_jobs j
SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = %(worker_id)s,
    locked_at = now(), updated_at = now()
FROM candidates c
WHERE j.id = c.id
RETURNING j.id, j.document_id, j.attempts, j.max_attempts, j.operation, j.force;

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
