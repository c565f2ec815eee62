-- A connector's new document waits for its bytes with an IDLE job (it used to be a FAILED job with
-- no finish time, a placeholder): nothing claims it (the claim takes PENDING and expired RUNNING
-- jobs only) until the fetch queues it or fails it. An idle job is never locked.
ALTER TABLE ingestion_jobs DROP CONSTRAINT ingestion_jobs_status_check;
ALTER TABLE ingestion_jobs ADD CONSTRAINT ingestion_jobs_status_check
    CHECK (status IN ('IDLE', 'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'));
ALTER TABLE ingestion_jobs ADD CONSTRAINT ingestion_jobs_idle_is_unlocked
    CHECK (status <> 'IDLE' OR (locked_by IS NULL AND locked_at IS NULL));

UPDATE ingestion_jobs j SET status = 'IDLE', updated_at = now()
FROM documents d
WHERE d.id = j.document_id AND d.status = 'FETCHING' AND j.status = 'FAILED' AND j.finished_at IS NULL;
