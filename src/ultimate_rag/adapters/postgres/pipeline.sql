-- The pipeline's statements (adapters/postgres/pipeline.py), in one place: what a job reads and
-- writes under the queue's fencing (queue.sql: lock_fenced, fenced_document_update). Loaded by
-- name: each query starts with a "-- name --" header line.

-- load_document --
-- What a job reads of its document when it starts (the pipeline_documents view: with its knowledge
-- base's index state, the index plan in the same read); a claim returns it with the job already.
SELECT * FROM pipeline_documents WHERE id = %(document_id)s;

-- set_stage --
-- (fragment of queue.sql's fenced_document_update) status before action, a stale error cleared; entering
-- PARSING starts a new run, so the stage timings start over
status = %(status)s, error_message = NULL, progress = %(progress)s,
stage_timings = CASE WHEN %(status)s = 'PARSING' THEN '{}'::jsonb ELSE d.stage_timings END
    || jsonb_build_object(%(status)s::text, now())

-- set_progress --
progress = %(progress)s

-- start_parsing --
-- (fragment) set_stage's PARSING, with the parser about to run and no warnings yet (a failed parse
-- leaves none behind)
status = %(status)s, error_message = NULL, progress = %(progress)s,
stage_timings = jsonb_build_object(%(status)s::text, now()),
parser_name = %(name)s, parser_version = %(version)s, warnings = '[]'

-- set_warnings --
warnings = %(warnings)s

-- complete_ready_jobs --
-- ``complete`` for documents that are READY already, many jobs in one statement (concurrent
-- completions are grouped, see pipeline.py): each job ends only if it is still owned by the worker and
-- attempt that completes it, and its document is READY. Job rows are locked in document order, as
-- a bulk operation locks them (lifecycle.sql), so no two such statements, and no bulk operation,
-- wait on each other in a circle. Returns the jobs that ended; any other was fenced out.
WITH batch AS (
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(worker_ids)s::text[], %(attempts)s::int[])
        AS b(job_id, worker_id, attempt)
), owned AS (
    SELECT j.id FROM ingestion_jobs j JOIN batch b ON b.job_id = j.id
    WHERE j.status = 'RUNNING' AND j.locked_by = b.worker_id AND j.attempts = b.attempt
    ORDER BY j.document_id
    FOR UPDATE OF j
)
UPDATE ingestion_jobs j
SET status = 'SUCCEEDED', locked_by = NULL, locked_at = NULL, updated_at = now(), finished_at = now(),
    lost_streak = 0, lost_workers = '{}', lost_since = NULL
WHERE j.id = ANY (ARRAY(SELECT id FROM owned))
  AND EXISTS (SELECT 1 FROM documents d WHERE d.id = j.document_id AND d.status = 'READY')
RETURNING j.id;

-- publish_revision --
-- The READY commit's writes after its fencing, in one statement (pipeline.py ``commit_ready``, steps
-- 5-8): the document's chunk rows become the new revision's (%(chunks)s: a JSON array of the rows;
-- the old rows go first: the insert waits for that delete, so a chunk that keeps its id and ordinal
-- meets no conflict), every asset row but the revision's own goes (their object keys are
-- returned), the document becomes READY (the commit flag, written with the facts it vouches for;
-- its stage timestamps are returned; the metadata's parsed keys, %(parsed_keys)s, become the new
-- revision's, %(properties)s, the user's keys untouched) and the job SUCCEEDED. Returns the
-- knowledge base's index state too, which the caller checks before it commits, and the revision
-- published before (read from the statement's snapshot: NULL when search served nothing of it).
WITH old_chunks AS (
    DELETE FROM chunks WHERE document_id = %(document_id)s RETURNING 1
), new_chunks AS (
    INSERT INTO chunks (id, document_id, knowledge_base_id, revision, ordinal, content, token_count, heading_path,
                        locator, metadata, identifiers)
    SELECT r.id, r.document_id, r.knowledge_base_id, %(revision)s, r.ordinal, r.content, r.token_count,
           r.heading_path, r.locator, r.metadata, r.identifiers
    FROM jsonb_to_recordset(%(chunks)s::jsonb) AS r(id uuid, document_id uuid, knowledge_base_id uuid, ordinal integer,
                                                   content text, token_count integer, heading_path text[],
                                                   locator jsonb, metadata jsonb, identifiers text[])
    WHERE (SELECT count(*) FROM old_chunks) >= 0
    RETURNING 1
), stale_assets AS (  -- other revisions', and those an interrupted earlier run of this revision left
    DELETE FROM document_assets
    WHERE document_id = %(document_id)s AND (revision <> %(revision)s OR id <> ALL(%(keep)s::uuid[]))
    RETURNING object_key
), job AS (
    UPDATE ingestion_jobs
    SET status = 'SUCCEEDED', locked_by = NULL, locked_at = NULL, updated_at = now(), finished_at = now(),
        lost_streak = 0, lost_workers = '{}', lost_since = NULL
    WHERE id = %(job_id)s
), ready AS (
    UPDATE documents SET status = 'READY', error_message = NULL,
        metadata = (metadata - %(parsed_keys)s::text[]) || %(properties)s::jsonb,
        chunk_count = (SELECT count(*) FROM new_chunks), published_revision = %(revision)s, progress = '{}'::jsonb,
        indexed_at = now(), updated_at = now(), stage_timings = stage_timings || jsonb_build_object('READY', now())
    WHERE id = %(document_id)s
    RETURNING stage_timings
)
SELECT (SELECT stage_timings FROM ready) AS stage_timings, ARRAY(SELECT object_key FROM stale_assets) AS stale,
       d.published_revision AS previous_revision, s.settings, s.migration_target, s.migration_id
FROM documents d JOIN knowledge_base_index_state s ON s.knowledge_base_id = d.knowledge_base_id
WHERE d.id = %(document_id)s;

-- succeed_job --
UPDATE ingestion_jobs
SET status = 'SUCCEEDED', locked_by = NULL, locked_at = NULL, updated_at = now(), finished_at = now(),
    lost_streak = 0, lost_workers = '{}', lost_since = NULL
WHERE id = %(job_id)s;

-- document_deleted --
-- Soft delete: the row stays (its source object too); what was derived from it is gone.
UPDATE documents SET status = 'DELETED', deleted_at = now(), chunk_count = 0, progress = '{}'::jsonb,
    error_message = NULL, duplicate_of = NULL, content_hash = NULL, minhash = NULL, updated_at = now(),
    stage_timings = stage_timings || jsonb_build_object('DELETED', now())
WHERE id = %(document_id)s;

-- delete_document --
DELETE FROM documents WHERE id = %(document_id)s;

-- delete_chunks --
DELETE FROM chunks WHERE document_id = %(document_id)s;

-- delete_assets --
DELETE FROM document_assets WHERE document_id = %(document_id)s RETURNING object_key;

-- insert_asset --
INSERT INTO document_assets (id, document_id, knowledge_base_id, revision, object_key, mime_type, size_bytes,
                             page, description, locator_key)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- delete_revision_assets --
-- One revision's asset rows (the published revision's stay until the READY commit).
DELETE FROM document_assets WHERE document_id = %(document_id)s AND revision = %(revision)s RETURNING object_key;

-- content_revision --
SELECT content_revision FROM documents WHERE id = %(document_id)s;

-- delete_hash_bands --
DELETE FROM document_hash_bands WHERE document_id = %(document_id)s;
