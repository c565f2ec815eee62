-- Document rows seen from the API side (documents.py). Loaded by name: each query starts with a
-- "-- name --" header line.

-- create_with_job --
-- columns: document_columns
-- An upload's document, queued (PENDING from the start: its bytes are stored already), its job, and
-- the workers woken (delivered at commit), in one statement. The knowledge base is held FOR SHARE
-- meanwhile (a knowledge-base delete waits for this to commit) and nothing is written while it is
-- being deleted. No row: no such knowledge base; a row without a document: it is being deleted.
-- With %(uploaded_by)s (an API key's prefix), the upload's audit entry is written in the same
-- statement: an upload and its audit entry commit together or not at all.
WITH kb AS MATERIALIZED (
    SELECT id, deleting FROM knowledge_bases WHERE id = %(kb)s FOR SHARE
), d AS (
    INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key, status,
                           source, stage_timings, metadata)
    SELECT %(id)s, kb.id, %(filename)s, %(mime_type)s, %(size_bytes)s, %(sha256)s, %(object_key)s, 'PENDING',
           %(source)s, jsonb_build_object('PENDING', now()), %(metadata)s
    FROM kb WHERE NOT kb.deleting
    RETURNING *
), flow AS (
    -- whose work it is (the knowledge base, the uploading key): its turn in the claim's fair order
    SELECT d.id, d.knowledge_base_id::text || '/' || coalesce(%(uploaded_by)s, '') AS name FROM d
), j AS (
    INSERT INTO ingestion_jobs (id, document_id, status, max_attempts, flow, turn)
    SELECT %(job_id)s, flow.id, 'PENDING', %(max_attempts)s, flow.name, queue_turn(flow.name) FROM flow
    RETURNING *
), woken AS (
    SELECT pg_notify(%(channel)s, '') FROM j
), audited AS (
    INSERT INTO audit_log (key_prefix, action, knowledge_base_id, document_id, detail)
    SELECT %(uploaded_by)s, 'document.upload', d.knowledge_base_id, d.id,
           jsonb_build_object('filename', d.filename, 'size_bytes', d.size_bytes::text, 'sha256', d.sha256)
    FROM d WHERE %(uploaded_by)s::text IS NOT NULL
)
SELECT kb.deleting, (SELECT count(*) FROM woken) AS woken, {columns}
FROM kb LEFT JOIN d ON true LEFT JOIN j ON j.document_id = d.id;

-- document_columns --
d.id, d.knowledge_base_id, d.filename, d.mime_type, d.size_bytes, d.sha256, d.object_key,
d.status, d.error_message, d.progress, d.parser_name, d.parser_version, d.chunk_count,
d.content_revision, d.source, d.duplicate_of, d.stage_timings, d.created_at, d.updated_at,
d.indexed_at, d.deleted_at, d.dedup, d.warnings, d.published_revision, d.metadata,
j.attempts, j.max_attempts, j.status AS job_status, j.operation AS job_operation

-- get_document --
-- columns: document_columns
SELECT {columns} FROM documents d LEFT JOIN ingestion_jobs j ON j.document_id = d.id
WHERE d.id = %(id)s;

-- list_documents --
-- Newest first; keyset pagination on (created_at, id). columns: document_columns; conditions:
-- list_in_kb and the list_by_* fragments that apply, joined with AND.
SELECT {columns} FROM documents d LEFT JOIN ingestion_jobs j ON j.document_id = d.id
WHERE {conditions}
ORDER BY d.created_at DESC, d.id DESC LIMIT %(limit)s;

-- list_in_kb --
d.knowledge_base_id = %(kb)s

-- list_by_status --
d.status = %(status)s

-- list_by_filename --
-- the file name, or its path in the folder it was uploaded from (metadata source.path)
(d.filename ILIKE %(q)s OR d.metadata->'source'->>'path' ILIKE %(q)s)

-- list_after_cursor --
(d.created_at, d.id) < (%(c_at)s, %(c_id)s)

-- metadata_for_update --
-- A PATCH reads the metadata it merges into under the row's lock (concurrent PATCHes apply in turn).
SELECT metadata FROM documents WHERE id = %(id)s FOR UPDATE;

-- set_metadata --
-- The merged metadata: nothing else of the document changes (no rebuild, its revision keeps serving).
UPDATE documents SET metadata = %(metadata)s, updated_at = now() WHERE id = %(id)s;

-- job_history --
SELECT error_history FROM ingestion_jobs WHERE document_id = %(id)s;

-- chunks_page --
SELECT * FROM chunks WHERE document_id = %(id)s AND ordinal > %(after)s ORDER BY ordinal LIMIT %(limit)s;

-- document_assets --
-- The published revision's assets (with none published, those of the revision last built).
SELECT a.* FROM document_assets a JOIN documents d ON d.id = a.document_id
WHERE a.document_id = %(id)s AND a.revision = coalesce(d.published_revision, d.content_revision)
ORDER BY a.page NULLS FIRST, a.locator_key;

-- ready_chunks --
-- The double filter (SPEC §4 rule 3). searchable: search_filters' searchable_chunk; filters:
-- " AND ..." for each search filter, or nothing.
SELECT c.id, c.document_id, c.content, c.heading_path, c.locator, c.metadata, c.identifiers, d.filename,
       d.metadata AS document_metadata
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.id = ANY(%(ids)s) AND c.knowledge_base_id = %(kb)s AND d.knowledge_base_id = %(kb)s
  AND {searchable}{filters};

-- published_chunk_ids --
-- searchable: search_filters' searchable_chunk.
SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.document_id = %(id)s AND {searchable};

-- reset_job --
-- The document's single job queued again (attempts start over), from the job statuses the job
-- table lets go to PENDING (%(job_from)s: status.job_sources_of), with a new turn in the flow of
-- its knowledge base and %(source)s (who queued it: '' for an operation, a connector's items).
WITH flow AS (
    SELECT knowledge_base_id::text || '/' || %(source)s AS name FROM documents WHERE id = %(id)s
)
UPDATE ingestion_jobs SET status = 'PENDING', operation = %(operation)s, force = %(force)s, attempts = 0,
    max_attempts = %(max_attempts)s, available_at = now(), locked_by = NULL, locked_at = NULL,
    last_error = NULL, finished_at = NULL, updated_at = now(), queued_at = now(),
    lost_streak = 0, lost_workers = '{}', lost_since = NULL, flow = flow.name, turn = queue_turn(flow.name)
FROM flow
WHERE document_id = %(id)s AND status = ANY(%(job_from)s);

-- notify_workers --
SELECT pg_notify(%(channel)s, '');
