-- Language centroids: per knowledge base, model and script language, the running sum and count of
-- the chunks' dense and sparse vectors (float32 bytes). Loaded by name ("-- name --" headers).

-- lock_centroid --
-- The row to add to, locked; made empty when it is not there yet (no vectors: the caller starts from
-- zeros, and writes the sums in the same transaction). An upsert whose update changes nothing still
-- locks the row it meets and returns it, so one statement makes and locks it. The sparse sum
-- (64 KiB) is returned only %(with_sparse)s: chunks without sparse vectors leave it as it is.
INSERT INTO language_centroids AS t (knowledge_base_id, model, language, n, dense, sparse)
VALUES (%(kb)s, %(model)s, %(language)s, 0, '\x', '\x')
ON CONFLICT (knowledge_base_id, model, language) DO UPDATE SET n = t.n
RETURNING t.n, t.dense, CASE WHEN %(with_sparse)s THEN t.sparse END AS sparse;

-- write_centroid --
-- %(sparse)s NULL: the sparse sum stays as it is.
UPDATE language_centroids SET n = %(n)s, dense = %(dense)s, sparse = COALESCE(%(sparse)s, sparse)
WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND language = %(language)s;

-- centroids --
SELECT language, n, dense, sparse FROM language_centroids
WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND n >= %(min_chunks)s;
