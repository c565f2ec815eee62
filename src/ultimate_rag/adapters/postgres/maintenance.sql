-- Maintenance and operations SQL: the orphan sweeper, the /metrics gauges, stuck documents and the
-- stage timings a worker reports after a job. Loaded by name ("-- name --" headers).

-- try_sweep_lock --
-- One sweeper at a time across every process and machine; a session lock, so it is released when
-- the pass ends or, should the process die, when its connection goes.
SELECT pg_try_advisory_lock(hashtext('ultimate_rag.janitor')) AS locked;

-- release_sweep_lock --
SELECT pg_advisory_unlock(hashtext('ultimate_rag.janitor')) AS released;

-- share_lock_documents --
-- Held while the objects these documents do not own are removed: a stage, a re-upload or a delete
-- must update the document row before it writes an object, so none can start meanwhile. Rows that
-- another transaction is changing right now are skipped (and their objects left to the next pass).
SELECT id FROM documents WHERE id = ANY(%(ids)s) ORDER BY id FOR SHARE SKIP LOCKED;

-- object_owners --
-- What each document owns: its current source object and its asset objects; plus whether a job is
-- working on it. Read after share_lock_documents, in the same transaction.
SELECT d.id, d.object_key, d.status, j.status AS job_status,
       ARRAY(SELECT a.object_key FROM document_assets a WHERE a.document_id = d.id) AS asset_keys
FROM documents d LEFT JOIN ingestion_jobs j ON j.document_id = d.id
WHERE d.id = ANY(%(ids)s);

-- existing_documents --
SELECT id FROM documents WHERE id = ANY(%(ids)s);

-- document_revisions --
SELECT id, published_revision, content_revision FROM documents WHERE id = ANY(%(ids)s);

-- existing_knowledge_bases --
SELECT id FROM knowledge_bases WHERE id = ANY(%(ids)s);

-- vector_table_exists --
SELECT to_regclass(%(table)s) IS NOT NULL AS present;

-- vector_documents_after --
-- The distinct document ids of a vector table after %(after)s, in order: a loose index scan that
-- costs one index probe per document however many vectors each one has. {table} is the vector
-- table's name, built from the embedding dimension, never from input.
WITH RECURSIVE ids AS (
    (SELECT document_id FROM {table} WHERE document_id > %(after)s ORDER BY document_id LIMIT 1)
    UNION ALL
    SELECT (SELECT v.document_id FROM {table} v WHERE v.document_id > ids.document_id
            ORDER BY v.document_id LIMIT 1)
    FROM ids WHERE ids.document_id IS NOT NULL
)
SELECT document_id FROM ids WHERE document_id IS NOT NULL LIMIT %(limit)s;

-- vector_candidates --
-- Of these documents holding vectors, those holding a vector that is not a chunk of their published
-- revision (a failed or crashed rebuild's, the previous revision's after a swap whose cleanup did not
-- run, any of a document that is not searchable), or that no longer exist. An UPLOADING document
-- keeps everything: a re-upload that never commits restores its previous status. {table} as above.
SELECT i.id AS document_id, d.id IS NULL AS gone
FROM unnest(%(ids)s::uuid[]) AS i(id) LEFT JOIN documents d ON d.id = i.id
WHERE d.id IS NULL
   OR (d.status <> 'UPLOADING' AND EXISTS (
        SELECT 1 FROM {table} v WHERE v.document_id = d.id AND NOT EXISTS (
            SELECT 1 FROM chunks c WHERE c.id = v.chunk_id AND c.document_id = d.id AND c.revision = d.published_revision)));

-- lock_idle_jobs --
-- The jobs of these documents that no worker runs, locked: while the lock is held no worker can
-- claim them, and only a running job can make a document READY or write its vectors.
SELECT document_id FROM ingestion_jobs
WHERE document_id = ANY(%(ids)s) AND status <> 'RUNNING'
ORDER BY document_id
FOR UPDATE SKIP LOCKED;

-- delete_orphan_vectors --
-- Run after lock_idle_jobs in the same transaction (a new snapshot: the published check is current).
-- %(idle)s: documents whose job we hold; %(gone)s: documents whose row is gone (ids never return).
-- Kept: the chunks of each document's published revision (what search serves), and everything of
-- an UPLOADING document. {table}: the dense table, then the sparse one.
DELETE FROM {table} v
WHERE (v.document_id = ANY(%(idle)s)
       AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = v.document_id AND (d.status = 'UPLOADING'
           OR EXISTS (SELECT 1 FROM chunks c WHERE c.id = v.chunk_id AND c.document_id = d.id
                      AND c.revision = d.published_revision))))
   OR (v.document_id = ANY(%(gone)s)
       AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = v.document_id))
RETURNING v.document_id;

-- document_metrics --
-- Documents per status, and how many of them are stuck (see stuck_condition).
SELECT d.status, count(*) AS n, count(*) FILTER (WHERE {stuck}) AS stale
FROM documents d LEFT JOIN ingestion_jobs j ON j.document_id = d.id
GROUP BY d.status;

-- stuck_condition --
-- Stuck means stuck, not a healthy backlog: an active document %(older_than)s seconds in its status
-- that is running with no heartbeat for that long (its worker died or hangs), or due while no
-- worker is busy (nobody is taking work), or outside the queue (an upload or a fetch that never
-- finished). A queued document waiting behind busy workers, or waiting a retry's backoff, is not
-- stuck: the queue's age is exported for that. Used with the documents d LEFT JOIN jobs j.
d.status = ANY(%(active)s) AND d.updated_at <= now() - make_interval(secs => %(older_than)s) AND (
    (j.status = 'RUNNING' AND j.locked_at <= now() - make_interval(secs => %(older_than)s))
    OR (j.status = 'PENDING' AND j.available_at <= now()
        AND NOT EXISTS (SELECT 1 FROM ingestion_jobs busy
                        WHERE busy.status = 'RUNNING'
                          AND busy.locked_at > now() - make_interval(secs => %(lease_seconds)s)))
    OR j.status IS NULL OR j.status NOT IN ('PENDING', 'RUNNING'))

-- job_metrics --
-- Queued and running jobs; "due" jobs are PENDING ones a worker may claim now, and the age of the
-- oldest of them is how long the queue makes work wait. Reads the partial indexes only.
SELECT status, count(*) AS n,
       count(*) FILTER (WHERE status = 'PENDING' AND available_at <= now()) AS due,
       coalesce(extract(epoch FROM now() - min(available_at)
                        FILTER (WHERE status = 'PENDING' AND available_at <= now())), 0)::float8 AS oldest_due,
       coalesce(max(extract(epoch FROM now() - available_at)), 0)::float8 AS oldest
FROM ingestion_jobs WHERE status IN ('PENDING', 'RUNNING') GROUP BY status;

-- stuck_documents --
-- The stuck documents (see stuck_condition), the longest-waiting first.
SELECT d.id, d.knowledge_base_id, d.filename, d.status, d.updated_at,
       extract(epoch FROM now() - d.updated_at)::float8 AS seconds_in_status,
       coalesce(j.attempts, 0) AS attempts, j.locked_by
FROM documents d LEFT JOIN ingestion_jobs j ON j.document_id = d.id
WHERE {stuck}
ORDER BY d.updated_at, d.id
LIMIT %(limit)s;
