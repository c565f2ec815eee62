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
-- upsert, with the chunks' sparse and lexical vectors and the revision's lexical share in the same
-- statement (composed in: sparse_pg.sql's upsert and lexical_pg.sql's, their parameters named apart
-- from these).
WITH sparse AS (
{sparse_upsert}
), {lexical_upsert}
{dense_upsert}

-- delete_document --
DELETE FROM {table} WHERE document_id = %s

-- delete_document_except --
DELETE FROM {table} WHERE document_id = %s AND chunk_id <> ALL(%s)

-- delete_document_except_with_sparse --
-- The dense, sparse and lexical vectors of a document but those of the chunks kept, in one statement.
WITH sparse AS (DELETE FROM {sparse} WHERE document_id = %(document_id)s AND chunk_id <> ALL(%(keep)s::uuid[])),
lexical AS (DELETE FROM {lexical} WHERE document_id = %(document_id)s AND chunk_id <> ALL(%(keep)s::uuid[]))
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
SELECT d.chunk_id, 1 - d.distance AS dense, 0 AS sparse, 0 AS lexical FROM d

-- dense_side_with_others --
-- {sparse_score}/{sparse_join} and {lexical}/{lexical_join}: the candidates' learned sparse similarity
-- and BM25 score (sparse_score, sparse_join, lexical_score, lexical_join below) or 0.
WITH d AS MATERIALIZED (SELECT chunk_id, embedding <=> %(q)s AS distance FROM {table}
    WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(q)s LIMIT %(n)s)
SELECT d.chunk_id, 1 - d.distance AS dense, {sparse_score} AS sparse, {lexical} AS lexical
FROM d{sparse_join}{lexical_join}

-- sparse_side --
WITH s AS MATERIALIZED (SELECT chunk_id, embedding <=> %(qs)s AS distance FROM {sparse}
    WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(qs)s LIMIT %(n)s)
SELECT s.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, 1 - s.distance AS sparse, {lexical} AS lexical
FROM s LEFT JOIN {table} v ON v.chunk_id = s.chunk_id{lexical_join}

-- lexical_side --
-- The BM25 top (the GIN index gives the chunks holding a candidate term) with the other two
-- similarities; {sparse_score} and {sparse_join}: the learned sparse one, or 0 without a sparse query.
WITH l AS MATERIALIZED (SELECT chunk_id, weights <#> %(ql)s AS distance FROM {lexical_table}
    WHERE terms && %(qt)s::int4[] AND knowledge_base_id = %(kb)s{where}
    ORDER BY weights <#> %(ql)s, chunk_id LIMIT %(n)s)
SELECT l.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, {sparse_score} AS sparse, -l.distance AS lexical
FROM l LEFT JOIN {table} v ON v.chunk_id = l.chunk_id{sparse_join}

-- lexical_score --
COALESCE(-(lx.weights <#> %(ql)s), 0)

-- lexical_join --
LEFT JOIN {lexical_table} lx ON lx.chunk_id = {alias}.chunk_id

-- sparse_score --
COALESCE(1 - (sp.embedding <=> %(qs)s), 0)

-- sparse_join --
LEFT JOIN {sparse} sp ON sp.chunk_id = {alias}.chunk_id

-- scored --
-- Named chunks' similarities, read by primary key (the identifier stage's candidates: no index walk);
-- {sparse_score}/{sparse_join} and {lexical}/{lexical_join} as for the sides (or 0).
SELECT v.chunk_id, 1 - (v.embedding <=> %(q)s) AS dense, {sparse_score} AS sparse, {lexical} AS lexical
FROM {table} v{sparse_join}{lexical_join}
WHERE v.chunk_id = ANY(%(ids)s::uuid[]) AND v.knowledge_base_id = %(kb)s
