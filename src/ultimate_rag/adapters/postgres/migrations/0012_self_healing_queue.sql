-- Self-healing queue (docs/architecture.md, "Lost leases and poison files"; "Claim order").
--
-- queued_at: when the job's current run entered the queue. The claim takes due jobs in this order,
-- so a retry keeps its place instead of waiting behind everything uploaded after it.
-- lost_streak / lost_workers / lost_since: consecutive attempts that ended in an expired lease
-- (the worker died or hung), which workers lost them, and when the streak began. Reset whenever an
-- attempt ends normally and whenever the job is queued again.
ALTER TABLE ingestion_jobs
    ADD COLUMN queued_at    timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN lost_streak  integer NOT NULL DEFAULT 0,
    ADD COLUMN lost_workers text[] NOT NULL DEFAULT '{}',
    ADD COLUMN lost_since   timestamptz;

UPDATE ingestion_jobs SET queued_at = least(created_at, available_at);

-- the claim's due source, read in queue order (same name: the claim reads it, as before)
DROP INDEX ingestion_jobs_pending_idx;
CREATE INDEX ingestion_jobs_pending_idx ON ingestion_jobs (queued_at, available_at) WHERE status = 'PENDING';

-- due suspects (the last attempt ended in a lost lease), found without walking the whole backlog
CREATE INDEX ingestion_jobs_suspect_idx ON ingestion_jobs (queued_at) WHERE status = 'PENDING' AND lost_streak > 0;

-- "did any job succeed since ...?": the poison-file rule asks it, by index, with LIMIT 1
CREATE INDEX ingestion_jobs_succeeded_idx ON ingestion_jobs (finished_at) WHERE status = 'SUCCEEDED';

-- Every lease that expired, by worker: the poison-file rule fails a file only if no *other* worker
-- lost a lease during its streak (a crash loop that kills workers whatever they hold is not the
-- file's fault). Rows older than a day are pruned by the claim that records new ones.
CREATE TABLE lost_leases (
    worker_id text NOT NULL,
    job_id    uuid NOT NULL,
    lost_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX lost_leases_lost_at_idx ON lost_leases (lost_at);
