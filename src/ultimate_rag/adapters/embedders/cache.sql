-- The embedding cache (cache.py). {column} (embedding or sparse) is an identifier composed with
-- psycopg.sql; values are parameters.

-- get --
WITH hits AS (
    SELECT text_hash, {column}, last_used_at FROM embedding_cache
    WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND text_hash = ANY(%(hashes)s)
), touched AS (
    UPDATE embedding_cache e SET last_used_at = now()
    FROM hits h
    WHERE e.knowledge_base_id = %(kb)s AND e.model = %(model)s AND e.text_hash = h.text_hash
      AND h.last_used_at < now() - make_interval(secs => %(touch_after)s)
)
SELECT text_hash, {column} FROM hits

-- put --
-- Many entries in one statement; {kind} is the column's type (vector or sparsevec).
INSERT INTO embedding_cache (knowledge_base_id, model, text_hash, {column})
SELECT %(kb)s, %(model)s, text_hash, value
FROM unnest(%(hashes)s::bytea[], %(values)b::{kind}[]) AS e(text_hash, value)
ON CONFLICT DO NOTHING

-- count --
SELECT count(*) AS n FROM embedding_cache

-- evict --
WITH oldest AS (
    SELECT knowledge_base_id, model, text_hash FROM embedding_cache
    ORDER BY last_used_at LIMIT %(n)s
)
DELETE FROM embedding_cache e USING oldest o
WHERE e.knowledge_base_id = o.knowledge_base_id AND e.model = o.model AND e.text_hash = o.text_hash
