-- The job queue's SQL, in one place (SPEC §4). Loaded by name: each query starts with a
-- "-- name --" header line.

-- claim --
-- One statement, one round trip. First, jobs whose lease expired (their worker died or hung) are
-- converged, each lost attempt recorded in the error history with the worker that lost it:
--   * document already READY (or DELETED) -> job SUCCEEDED;
--   * a poison file (%(poison_after)s lost attempts in a row, on at least two workers, while other
--     jobs succeeded and no other worker lost a lease since the streak began) -> job and document
--     FAILED, saying so;
--   * the database itself restarted after the job's last renewal (pg_postmaster_start_time): the
--     lease expired because the database was down, not because the worker crashed -> given back,
--     saying so, and the streak of lost attempts (the poison rule's evidence) is left as it was;
--   * otherwise the attempt is given back (max_attempts + 1: a crash is not the document's fault)
--     and the job waits a backoff like a transient failure, document PENDING, keeping its place.
-- Then up to %(limit)s due PENDING jobs are claimed and their attempt is counted: deletes first,
-- then ingest work in turn order (fair across knowledge bases and uploaders: the turns were given
-- at enqueue, migration 0026's queue_turn; a retry keeps its turn); or, by an idle worker
-- (%(idle)s), one suspect alone.
-- Each claimed job comes with its document as its run reads it first (pipeline_documents).
-- The converged and the claimed jobs are disjoint (RUNNING vs PENDING in this statement's snapshot).
-- Re-uploads whose lease expired (the API died, or its commit failed and could not be undone,
-- between UPLOADING and queuing) are converged here too: the new bytes were never recorded (that
-- commit also leaves UPLOADING), so the document goes back to the stable status and error message
-- it had, with its previous revision; the unrecorded object is the janitor's. Locked with SKIP
-- LOCKED, so a claim never waits on an API that is finishing its upload right now.
-- Every status write here takes its allowed sources from the transition tables, as parameters
-- (JobQueue.claim_params: status.sources_of / job_sources_of of each target): job_*_from for
-- the converged jobs, %(fail_from)s / %(retry_from)s for their documents, %(upload_restore_from)s
-- for the restored uploads. The literal statuses that select the rows (RUNNING with an expired
-- lease, UPLOADING with an expired upload lease, PENDING and due) stay literal: they are the
-- predicates of the partial indexes this statement reads, which a generic plan can only use when
-- they are spelled as in the index; the parameters then gate the writes.
WITH expired AS (
    SELECT j.id, j.document_id, j.attempts, j.locked_by, j.locked_at, j.lost_streak, j.lost_workers, j.lost_since
    FROM ingestion_jobs j
    WHERE j.status = 'RUNNING'
      AND j.locked_at <= now() - make_interval(secs => %(lease_seconds)s)
    ORDER BY j.locked_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
), expired_docs AS (
    SELECT d.id, d.status FROM documents d JOIN expired e ON e.document_id = d.id FOR UPDATE OF d
), streaks AS (
    SELECT e.*, x.status AS document_status, e.lost_streak + 1 AS streak,
           CASE WHEN e.locked_by = ANY(e.lost_workers) THEN e.lost_workers
                ELSE e.lost_workers || e.locked_by END AS workers,
           coalesce(e.lost_since, now()) AS since
    FROM expired e JOIN expired_docs x ON x.id = e.document_id
), last_success AS (
    -- the newest success anywhere: one probe of a partial index, read only when a lease expired
    SELECT max(finished_at) AS at FROM ingestion_jobs WHERE status = 'SUCCEEDED'
), judged AS (
    SELECT s.*,
           CASE WHEN s.document_status IN ('READY', 'DELETED') THEN 'done'
                WHEN s.locked_at < pg_postmaster_start_time() THEN 'outage'
                WHEN s.streak >= %(poison_after)s AND cardinality(s.workers) >= 2
                     AND (SELECT at FROM last_success) >= s.since
                     AND NOT EXISTS (SELECT 1 FROM lost_leases l
                                     WHERE l.lost_at >= s.since AND l.worker_id <> ALL (s.workers))
                THEN 'poison'
                ELSE 'retry' END AS verdict,
           least(%(retry_delay)s * power(2, least(s.lost_streak, 20)), 300.0) * (0.9 + random() * 0.2) AS delay
    FROM streaks s
), recorded AS (
    INSERT INTO lost_leases (worker_id, job_id) SELECT locked_by, id FROM judged WHERE verdict <> 'outage'
), pruned AS (
    DELETE FROM lost_leases WHERE lost_at < now() - interval '1 day' AND EXISTS (SELECT 1 FROM expired)
), converged AS (
    UPDATE ingestion_jobs j
    SET status = CASE g.verdict WHEN 'done' THEN 'SUCCEEDED' WHEN 'poison' THEN 'FAILED' ELSE 'PENDING' END,
        locked_by = NULL, locked_at = NULL, updated_at = now(),
        finished_at = CASE WHEN g.verdict IN ('retry', 'outage') THEN NULL ELSE now() END,
        available_at = CASE WHEN g.verdict IN ('retry', 'outage') THEN now() + make_interval(secs => g.delay)
                            ELSE j.available_at END,
        max_attempts = CASE WHEN g.verdict IN ('retry', 'outage') THEN j.max_attempts + 1 ELSE j.max_attempts END,
        lost_streak = CASE g.verdict WHEN 'retry' THEN g.streak WHEN 'outage' THEN j.lost_streak ELSE 0 END,
        lost_workers = CASE g.verdict WHEN 'retry' THEN g.workers WHEN 'outage' THEN j.lost_workers ELSE '{}' END,
        lost_since = CASE g.verdict WHEN 'retry' THEN g.since WHEN 'outage' THEN j.lost_since END,
        last_error = CASE g.verdict WHEN 'done' THEN j.last_error
            WHEN 'poison' THEN format(%(poison_message)s, g.streak, cardinality(g.workers))
            WHEN 'outage' THEN %(outage_error)s
            ELSE format(%(lost_message)s, g.locked_by) END,
        error_history = j.error_history || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
            'attempt', j.attempts, 'at', now(), 'worker', g.locked_by,
            'lost_lease', CASE WHEN g.verdict <> 'outage' THEN true END,
            'outage', CASE WHEN g.verdict = 'outage' THEN true END,
            'error', CASE WHEN g.verdict = 'outage' THEN %(outage_error)s ELSE format(%(lost_message)s, g.locked_by) END,
            'retry_in_seconds', CASE WHEN g.verdict IN ('retry', 'outage') THEN round(g.delay::numeric, 1) END)))
    FROM judged g
    WHERE j.id = g.id
      AND j.status = ANY(CASE g.verdict WHEN 'done' THEN %(job_succeed_from)s::text[]
                                        WHEN 'poison' THEN %(job_fail_from)s::text[]
                                        ELSE %(job_retry_from)s::text[] END)
    RETURNING j.document_id, j.status, j.last_error, g.attempts, g.delay, g.verdict
), converged_docs AS (
    UPDATE documents d
    SET status = c.status, updated_at = now(), progress = '{}'::jsonb,
        -- a failed rebuild: the published revision keeps serving, and the message says so
        error_message = CASE WHEN c.status = 'FAILED' THEN c.last_error
                || CASE WHEN d.published_revision IS NOT NULL THEN format(%(still_served)s, d.published_revision)
                        ELSE '' END
            WHEN c.verdict = 'outage' THEN format(%(outage_interrupted)s, c.attempts, round(c.delay::numeric))
            ELSE format(%(interrupted_message)s, c.attempts, round(c.delay::numeric, 1)) END
    FROM converged c
    WHERE d.id = c.document_id
      AND ((c.status = 'FAILED' AND d.status = ANY(%(fail_from)s::text[]))
           OR (c.status = 'PENDING' AND d.status = ANY(%(retry_from)s::text[])))
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
    WHERE d.id = s.id AND d.status = ANY(%(upload_restore_from)s::text[])
    RETURNING d.id
), suspect_due AS (
    -- a job whose last attempt ended in a lost lease is a suspect: it runs alone in a worker that
    -- has nothing else running, so if that worker dies again, it is this job that killed it
    SELECT id FROM ingestion_jobs
    WHERE status = 'PENDING' AND lost_streak > 0 AND available_at <= now() AND attempts < max_attempts
    ORDER BY turn
    LIMIT 1
), suspect AS (
    SELECT id FROM ingestion_jobs
    WHERE %(idle)s AND id = (SELECT id FROM suspect_due)
      AND status = 'PENDING' AND lost_streak > 0 AND available_at <= now() AND attempts < max_attempts
    FOR UPDATE SKIP LOCKED
), due_deletes AS (
    -- deletes (a user's, a knowledge base's removal) go before ingest work: they are short, and
    -- what was deleted must stop showing at once, not wait behind a backlog of uploads
    SELECT id
    FROM ingestion_jobs
    WHERE status = 'PENDING' AND operation = 'delete' AND available_at <= now() AND attempts < max_attempts
      AND lost_streak = 0 AND NOT EXISTS (SELECT 1 FROM suspect_due)
    ORDER BY turn
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), due AS (
    -- read in index order with its own LIMIT: a claim costs the same with ten queued jobs or a
    -- million; turn order, not due time, so a retry does not wait behind the whole backlog. While
    -- a suspect is due, busy workers take nothing new: they drain, and the first idle one takes it.
    SELECT id
    FROM ingestion_jobs
    WHERE status = 'PENDING' AND operation = 'ingest' AND available_at <= now() AND attempts < max_attempts
      AND lost_streak = 0 AND NOT EXISTS (SELECT 1 FROM suspect_due)
    ORDER BY turn
    LIMIT greatest(%(limit)s - (SELECT count(*) FROM due_deletes), 0)
    FOR UPDATE SKIP LOCKED
), candidates AS (
    SELECT id FROM suspect UNION ALL SELECT id FROM due_deletes UNION ALL SELECT id FROM due
), claimed AS (
    -- = ANY(ARRAY(...)), not a join: the generic plan cannot know %(limit)s, and a join planned
    -- for "many candidates" hashes the whole jobs table on every claim
    UPDATE ingestion_jobs j
    SET status = 'RUNNING', attempts = j.attempts + 1, locked_by = %(worker_id)s,
        locked_at = now(), updated_at = now()
    WHERE j.id = ANY (ARRAY(SELECT id FROM candidates))
    RETURNING j.id, j.document_id, j.attempts, j.max_attempts, j.operation, j.force, j.lost_streak > 0 AS suspect
)
SELECT c.id AS job_id, c.document_id, c.attempts, c.max_attempts, c.operation, c.force, c.suspect,
       (SELECT count(*) FROM converged_docs) AS converged,
       (SELECT count(*) FROM restored_uploads) AS restored_uploads,
       p.*  -- the job's document as its run reads it first (NULL when the document is gone)
FROM claimed c LEFT JOIN pipeline_documents p ON p.id = c.document_id;

-- fenced_document_update --
-- Fencing in one statement: lock the job row only if it is still ours (RUNNING, locked_by = me,
-- attempts = my attempt; re-checked after any concurrent update), then update the document if its
-- current status may move to the new one. Job row first, document second: the lock order used
-- everywhere. The SET list is one of the set_* fragments of pipeline.sql. The lease is the
-- heartbeat's to renew: renewing it here too wrote a new version of the job row (and its index
-- entries) for every stage: a quarter of this statement's server time.
WITH owned AS (
    SELECT id FROM ingestion_jobs
    WHERE id = %(job_id)s AND status = 'RUNNING' AND locked_by = %(worker_id)s AND attempts = %(attempt)s
    FOR UPDATE
)
UPDATE documents d
SET {assignments}, updated_at = now()
FROM owned
WHERE d.id = %(document_id)s AND d.status = ANY(%(from_statuses)s)
RETURNING d.id;

-- fencing_state --
-- Why a fenced statement changed nothing: is the job still ours, and where is the document?
SELECT (j.status = 'RUNNING' AND j.locked_by = %(worker_id)s AND j.attempts = %(attempt)s) AS owned,
       d.status AS document_status
FROM ingestion_jobs j LEFT JOIN documents d ON d.id = j.document_id
WHERE j.id = %(job_id)s;

-- lock_fenced --
-- Fencing, for a transaction, in one statement: the job row locked only if it is still ours
-- (RUNNING, locked by us, at the attempt we claimed), then the document row. Job row first,
-- document second, the lock order used everywhere: the document's lock is a lateral subquery
-- that depends on the locked job row, so it runs only after that row is locked. Before both, when
-- %(first)s names one, a transaction-level advisory lock (e.g. a knowledge base's deduplication
-- lock, dedup.py's lock_name; released at commit): the job row is joined to it, so it is locked
-- only once the advisory lock is held (a NULL name takes nothing: the lock function is strict). No
-- row: the job is no longer ours; a NULL status: the document no longer exists.
WITH first AS MATERIALIZED (
    SELECT count(*) AS held FROM (SELECT %(first)s::text AS name) n
    WHERE pg_advisory_xact_lock(hashtextextended(n.name, 7)) IS NOT NULL
), owned AS MATERIALIZED (
    SELECT j.id FROM ingestion_jobs j, first
    WHERE j.id = %(job_id)s AND j.status = 'RUNNING' AND j.locked_by = %(worker_id)s AND j.attempts = %(attempt)s
    FOR UPDATE OF j
)
SELECT o.id, d.status
FROM owned o
LEFT JOIN LATERAL (
    SELECT status FROM documents WHERE id = %(document_id)s AND o.id IS NOT NULL FOR UPDATE
) d ON true;

-- heartbeat --
UPDATE ingestion_jobs SET locked_at = now()
WHERE id = %(job_id)s AND status = 'RUNNING' AND locked_by = %(worker_id)s AND attempts = %(attempt)s
RETURNING id;

-- retry_job --
-- A transient failure: the job waits %(delay)s seconds. One caused by an outage of a dependency
-- (%(given_back)s: the database, the object storage, the embedder could not be reached) is given
-- back like a lost lease (max_attempts + 1): it is not the document's fault.
UPDATE ingestion_jobs
SET status = 'PENDING', available_at = now() + make_interval(secs => %(delay)s),
    locked_by = NULL, locked_at = NULL, updated_at = now(), last_error = %(error)s,
    max_attempts = max_attempts + CASE WHEN %(given_back)s THEN 1 ELSE 0 END,
    lost_streak = 0, lost_workers = '{}', lost_since = NULL,
    error_history = error_history || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
        'attempt', attempts, 'at', now(), 'error', %(error)s::text, 'retry_in_seconds', %(delay)s::float8,
        'outage', CASE WHEN %(given_back)s THEN true END)))
WHERE id = %(job_id)s;

-- fail_job --
UPDATE ingestion_jobs
SET status = 'FAILED', locked_by = NULL, locked_at = NULL, updated_at = now(), finished_at = now(),
    last_error = %(error)s, lost_streak = 0, lost_workers = '{}', lost_since = NULL,
    error_history = error_history || jsonb_build_array(jsonb_build_object(
        'attempt', attempts, 'at', now(), 'error', %(error)s::text))
WHERE id = %(job_id)s;

-- release_job --
-- Graceful shutdown: hand the job back without burning the attempt it was claimed with.
UPDATE ingestion_jobs
SET status = 'PENDING', attempts = greatest(attempts - 1, 0), available_at = now(),
    locked_by = NULL, locked_at = NULL, updated_at = now(), lost_streak = 0, lost_workers = '{}', lost_since = NULL
WHERE id = %(job_id)s;

-- document_attempt_ended --
-- A failed attempt: PENDING (a retry is scheduled) or FAILED, with its message; a FAILED rebuild
-- whose published revision keeps serving says so (%(still_served)s: a format() pattern).
UPDATE documents SET status = %(status)s,
    error_message = %(message)s || CASE WHEN %(status)s = 'FAILED' AND published_revision IS NOT NULL
                                        THEN format(%(still_served)s, published_revision) ELSE '' END,
    progress = '{}'::jsonb, updated_at = now()
WHERE id = %(document_id)s;

-- delete_unpublished_chunks --
-- An attempt ended without READY: chunks of anything but the published revision go (all of them
-- when nothing is published); the published revision's keep serving.
DELETE FROM chunks c USING documents d
WHERE c.document_id = %(document_id)s AND d.id = c.document_id AND c.revision IS DISTINCT FROM d.published_revision;

-- delete_unpublished_assets --
-- Beside a published revision, the failed revision's asset rows go (their objects are the janitor's).
DELETE FROM document_assets a USING documents d
WHERE a.document_id = %(document_id)s AND d.id = a.document_id AND a.revision <> d.published_revision;

-- unpublished_chunk_count --
UPDATE documents SET chunk_count = CASE WHEN published_revision IS NULL THEN 0 ELSE chunk_count END
WHERE id = %(document_id)s;

-- document_released --
UPDATE documents SET status = 'PENDING', progress = '{}'::jsonb, updated_at = now()
WHERE id = %(document_id)s;

-- listen --
-- the channel is documents.NOTIFY_CHANNEL, the one spelling of its name (an identifier)
LISTEN {channel};
