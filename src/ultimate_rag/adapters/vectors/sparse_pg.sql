-- The learned sparse vectors (sparse_pg.py). {sparse} (their table) is an identifier composed with
-- psycopg.sql; {where} and {heading} are filter fragments (search_filters.py); values are parameters.

-- upsert --
-- A document's sparse vectors in one statement (also composed into pgvector.sql's
-- upsert_with_sparse, beside the dense ones: hence its parameters' own names).
INSERT INTO {sparse} (chunk_id, document_id, knowledge_base_id, embedding)
SELECT chunk_id, document_id, %(kb)s, embedding
FROM unnest(%(sparse_chunk_ids)s::uuid[], %(sparse_document_ids)s::uuid[], %(sparse_embeddings)b::sparsevec[])
    AS v(chunk_id, document_id, embedding)
ON CONFLICT (chunk_id) DO UPDATE SET embedding = EXCLUDED.embedding,
    document_id = EXCLUDED.document_id, knowledge_base_id = EXCLUDED.knowledge_base_id

-- upsert_with_lexical --
-- upsert, with the chunks' lexical vectors and the revision's lexical share (lexical_pg.sql's upsert).
WITH {lexical_upsert}
{sparse_upsert}

-- delete_document --
DELETE FROM {sparse} WHERE document_id = %s

-- delete_document_except --
DELETE FROM {sparse} WHERE document_id = %s AND chunk_id <> ALL(%s)

-- delete_knowledge_base --
DELETE FROM {sparse} WHERE knowledge_base_id = %s

-- search --
SELECT chunk_id, 1 - (embedding <=> %(qs)s) AS score FROM {sparse}
WHERE knowledge_base_id = %(kb)s{where} ORDER BY embedding <=> %(qs)s LIMIT %(n)s

-- scores --
SELECT chunk_id, 1 - (embedding <=> %s) AS score FROM {sparse} WHERE chunk_id = ANY(%s)

-- chunks_with_heading --
SELECT c.id FROM chunks c WHERE c.id = ANY(%(ids)s) AND {heading}
