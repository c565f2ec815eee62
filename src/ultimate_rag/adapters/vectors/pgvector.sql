-- The dense vectors in pgvector (pgvector.py). {table} (a dimension's shared table or an index
-- generation's), {index}, {sparse} (the learned sparse vectors' table) are identifiers and
-- {dimension} a literal, composed with psycopg.sql; {where} and {documents} are filter fragments;
-- values are parameters.

-- lock_table --
SELECT pg_advisory_xact_lock(hashtext(%s))

-- create_table --
CREATE TABLE IF NOT EXISTS {table} (
    chunk_id uuid PRIMARY KEY, document_id uuid NOT NULL, knowledge_base_id uuid NOT NULL,
    embedding vector({dimension}) NOT NULL)

-- create_document_index --
CREATE INDEX IF NOT EXISTS {index} ON {table} (document_id)

-- create_knowledge_base_index --
CREATE INDEX IF NOT EXISTS {index} ON {table} (knowledge_base_id)

-- create_hnsw_index --
CREATE INDEX IF NOT EXISTS {index} ON {table} USING hnsw (embedding vector_cosine_ops)

-- upsert --
-- A document's vectors in one statement (one round trip, one commit however many chunks).
INSERT INTO {table} (chunk_id, document_id, knowledge_base_id, embedding)
SELECT chunk_id, document_id, %(kb)s, embedding
FROM unnest(%(chunk_ids)s::uuid[], %(document_ids)s::uuid[], %(embeddings)b::vector[])
    AS v(chunk_id, document_id, embedding)
ON CONFLICT (chunk_id) DO UPDATE
SET embedding = EXCLUDED.embedding, document_id = EXCLUDED.document_id,
    knowledge_base_id = EXCLUDED.knowledge_base_id

-- upsert_with_sparse --
-- upsert, with the chunks' sparse vectors in the same statement (composed in: sparse_pg.sql's upsert,
-- its parameters named apart from these).
WITH sparse AS (
{sparse_upsert}
)
{dense_upsert}

-- delete_document --
DELETE FROM {table} WHERE document_id = %s

-- delete_document_except --
DELETE FROM {table} WHERE document_id = %s AND chunk_id <> ALL(%s)

-- delete_document_except_with_sparse --
-- The dense and the sparse vectors of a document but those of the chunks kept, in one statement.
WITH sparse AS (DELETE FROM {sparse} WHERE document_id = %(document_id)s AND chunk_id <> ALL(%(keep)s::uuid[]))
DELETE FROM {table} WHERE document_id = %(document_id)s AND chunk_id <> ALL(%(keep)s::uuid[])

-- delete_knowledge_base --
DELETE FROM {table} WHERE knowledge_base_id = %s

-- table_exists --
SELECT to_regclass(%s) AS t

-- drop_table --
DROP TABLE IF EXISTS {table}

-- count_document --
SELECT count(*) AS n FROM {table} WHERE document_id = %s

-- search --
SELECT chunk_id, 1 - (embedding <=> %(q)s) AS score FROM {table}
WHERE knowledge_base_id = %(kb)s {documents}
ORDER BY embedding <=> %(q)s LIMIT %(n)s

-- in_documents --
AND document_id = ANY(%(docs)s)

-- dense_side --
WITH d AS MATERIALIZED (SELECT chunk_id, embedding <=> %(q)s AS distance FROM {table}
    WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(q)s LIMIT %(n)s)
SELECT d.chunk_id, 1 - d.distance AS dense, 0 AS sparse FROM d

-- dense_side_with_sparse --
WITH d AS MATERIALIZED (SELECT chunk_id, embedding <=> %(q)s AS distance FROM {table}
    WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(q)s LIMIT %(n)s)
SELECT d.chunk_id, 1 - d.distance AS dense, COALESCE(1 - (sp.embedding <=> %(qs)s), 0) AS sparse
FROM d LEFT JOIN {sparse} sp ON sp.chunk_id = d.chunk_id

-- sparse_side --
WITH s AS MATERIALIZED (SELECT chunk_id, embedding <=> %(qs)s AS distance FROM {sparse}
    WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(qs)s LIMIT %(n)s)
SELECT s.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, 1 - s.distance AS sparse
FROM s LEFT JOIN {table} v ON v.chunk_id = s.chunk_id

-- scored --
-- Named chunks' dense similarity, read by primary key (the identifier stage's candidates: no index walk).
SELECT v.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, 0 AS sparse FROM {table} v
WHERE v.chunk_id = ANY(%(ids)s::uuid[]) AND v.knowledge_base_id = %(kb)s

-- scored_with_sparse --
-- scored, with each chunk's sparse similarity (0 without a sparse vector).
SELECT v.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, COALESCE(1 - (sp.embedding <=> %(qs)s), 0) AS sparse
FROM {table} v LEFT JOIN {sparse} sp ON sp.chunk_id = v.chunk_id
WHERE v.chunk_id = ANY(%(ids)s::uuid[]) AND v.knowledge_base_id = %(kb)s
