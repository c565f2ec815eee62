-- Fair claims (SPEC §4 "Claim"; docs/architecture.md "Claim order").
--
-- flow: whose work a job is: its knowledge base and who queued it (an API key's uploads, a
-- connector's items, the knowledge base's operations). turn: its place in the claim order, given
-- when the job is queued by queue_turn below: one turn after the later of the queue's head and
-- the flow's own last queued job. A flow's jobs are thus one turn apart, and a flow with nothing
-- queued starts at the head: a 300-file upload to one knowledge base takes turns 1..300, a file
-- uploaded to another knowledge base a moment later takes turn 2 and is claimed after at most one
-- job of every other flow with a backlog (round robin, decided once at enqueue: the claim itself
-- still reads one index in order, with SKIP LOCKED). A retry, a hand-back and a lost lease keep
-- their turn, as they kept their queued_at.
ALTER TABLE ingestion_jobs
    ADD COLUMN turn double precision NOT NULL DEFAULT 0,
    ADD COLUMN flow text NOT NULL DEFAULT '';

-- what is queued now keeps its order, one flow per knowledge base
UPDATE ingestion_jobs j
SET turn = q.n, flow = d.knowledge_base_id::text || '/'
FROM (SELECT id, row_number() OVER (ORDER BY queued_at, id) AS n FROM ingestion_jobs
      WHERE status IN ('PENDING', 'RUNNING')) q, documents d
WHERE j.id = q.id AND d.id = j.document_id;

-- the claim's due sources, in turn order: deletes (which go first) and ingest work apart
DROP INDEX ingestion_jobs_pending_idx;
CREATE INDEX ingestion_jobs_pending_idx ON ingestion_jobs (turn, available_at)
    WHERE status = 'PENDING' AND operation = 'ingest';
CREATE INDEX ingestion_jobs_pending_deletes_idx ON ingestion_jobs (turn, available_at)
    WHERE status = 'PENDING' AND operation = 'delete';
DROP INDEX ingestion_jobs_suspect_idx;
CREATE INDEX ingestion_jobs_suspect_idx ON ingestion_jobs (turn) WHERE status = 'PENDING' AND lost_streak > 0;
-- a flow's last queued job (queue_turn)
CREATE INDEX ingestion_jobs_flow_idx ON ingestion_jobs (flow, turn) WHERE status = 'PENDING';

-- The turn of a job of `job_flow` queued now: three index probes. The queue's head is the first
-- due ingest job; with none due, the last queued one (a retry waiting for its backoff keeps its
-- place ahead of what comes after it); with none queued, 0.
CREATE FUNCTION queue_turn(job_flow text) RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT greatest(
        coalesce((SELECT j.turn FROM ingestion_jobs j
                  WHERE j.status = 'PENDING' AND j.operation = 'ingest' AND j.available_at <= now()
                  ORDER BY j.turn LIMIT 1),
                 (SELECT max(j.turn) FROM ingestion_jobs j WHERE j.status = 'PENDING' AND j.operation = 'ingest'),
                 0),
        coalesce((SELECT max(j.turn) FROM ingestion_jobs j WHERE j.status = 'PENDING' AND j.flow = job_flow), 0)
    ) + 1
$$;
