-- Deduplication facts (SPEC §8): content hashes, MinHash signatures and LSH bands. Loaded by name
-- ("-- name --" headers); every query runs inside the caller's fenced transaction.

-- candidates --
-- Documents with the same normalized text, and (near mode) those sharing an LSH band: two index
-- lookups, never a scan of the knowledge base's documents (no bands: empty arrays, no band match).
-- %(matchable)s: the statuses a newer twin may outdate (status.DEDUP_MATCHABLE); a document whose
-- published revision search serves (a rebuild queued or failed) is matched too.
-- When none is found and %(record_if_none)s, the judgement is recorded in the same statement
-- (set_judgement's writes: hash, signature, an empty verdict, the bands replaced; the new bands are
-- inserted after the old ones went), and with it the document's next stage when the caller hands
-- one (the placeholder after the verdict: nothing, or pipeline.sql's set_stage, composed by
-- dedup.py), so the document is written once either way.
WITH ids AS (
    SELECT id AS document_id FROM documents
    WHERE knowledge_base_id = %(kb)s AND content_hash = %(hash)s
    UNION
    SELECT b.document_id FROM document_hash_bands b
    JOIN unnest(%(band_idx)s::smallint[], %(band_hash)s::bigint[]) AS q(band, hash)
      ON b.band = q.band AND b.hash = q.hash
    WHERE b.knowledge_base_id = %(kb)s
), found AS MATERIALIZED (
    SELECT d.id, d.filename, d.content_hash, d.minhash, d.created_at, d.source
    FROM ids JOIN documents d ON d.id = ids.document_id
    WHERE d.id <> %(doc)s AND (d.status = ANY(%(matchable)s) OR d.published_revision IS NOT NULL)
      AND d.id <> ALL(%(exempt)s::uuid[])
      AND d.content_hash IS NOT NULL
    ORDER BY d.created_at, d.id
    LIMIT 200
), unique_ AS (
    SELECT 1 WHERE %(record_if_none)s AND NOT EXISTS (SELECT 1 FROM found)
), old_bands AS (
    DELETE FROM document_hash_bands WHERE document_id = %(doc)s AND EXISTS (SELECT 1 FROM unique_) RETURNING 1
), new_bands AS (
    INSERT INTO document_hash_bands (document_id, knowledge_base_id, band, hash)
    SELECT %(doc)s, %(kb)s, q.band, q.hash
    FROM unnest(%(band_idx)s::smallint[], %(band_hash)s::bigint[]) AS q(band, hash)
    WHERE EXISTS (SELECT 1 FROM unique_) AND (SELECT count(*) FROM old_bands) >= 0
    RETURNING 1
), recorded AS (
    UPDATE documents d SET content_hash = %(hash)s, minhash = %(minhash)s, dedup = '{}'::jsonb{enter}
    WHERE d.id = %(doc)s AND EXISTS (SELECT 1 FROM unique_) AND (SELECT count(*) FROM new_bands) >= 0
)
SELECT * FROM found ORDER BY created_at, id;

-- delete_bands --
DELETE FROM document_hash_bands WHERE document_id = %(id)s;

-- set_judgement --
-- The document's hash, signature and verdict; its bands go (a reindex starts over: the new ones are
-- inserted by the next statements, which see this one's delete).
WITH gone AS (DELETE FROM document_hash_bands WHERE document_id = %(id)s)
UPDATE documents SET content_hash = %(hash)s, minhash = %(minhash)s, dedup = %(verdict)s WHERE id = %(id)s;

-- set_content_hash --
-- The older twin judged at once keeps its hash (what it was compared on) but no signature of its own.
UPDATE documents SET content_hash = %(hash)s WHERE id = %(id)s;

-- insert_band --
INSERT INTO document_hash_bands (document_id, knowledge_base_id, band, hash) VALUES (%s, %s, %s, %s);

-- lock_job --
SELECT id FROM ingestion_jobs WHERE document_id = %(id)s FOR UPDATE;

-- lock_document --
SELECT status FROM documents WHERE id = %(id)s FOR UPDATE;

-- end_outdated_job --
-- %(sources)s: the job statuses that may end SUCCEEDED (status.job_sources_of).
UPDATE ingestion_jobs SET status = 'SUCCEEDED', locked_by = NULL, locked_at = NULL, finished_at = now(),
    updated_at = now()
WHERE document_id = %(id)s AND status = ANY(%(sources)s);

-- delete_chunks --
DELETE FROM chunks WHERE document_id = %(id)s;

-- repoint_duplicates --
-- Documents outdated earlier in favour of the one being outdated now point on to its newer twin:
-- a duplicate_of never names a document that is itself OUTDATED (a chain to nothing searchable).
UPDATE documents SET duplicate_of = %(newer)s, updated_at = now()
WHERE duplicate_of = %(id)s AND status = 'OUTDATED' AND id <> %(newer)s;

-- outdate_document --
UPDATE documents SET status = 'OUTDATED', duplicate_of = %(newer)s, dedup = %(verdict)s, chunk_count = 0,
    published_revision = NULL, progress = '{}'::jsonb, error_message = NULL, updated_at = now()
WHERE id = %(id)s;
