-- Language centroids: per knowledge base, model and script language, the running sum and count of
-- the chunks' dense and sparse vectors (float32 bytes). Loaded by name ("-- name --" headers).

-- ensure_centroid --
-- A zero row to add to, so the FOR UPDATE below always finds one to lock.
INSERT INTO language_centroids AS t (knowledge_base_id, model, language, n, dense, sparse)
VALUES (%(kb)s, %(model)s, %(language)s, 0, %(dense)s, %(sparse)s)
ON CONFLICT DO NOTHING;

-- lock_centroid --
SELECT n, dense, sparse FROM language_centroids
WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND language = %(language)s
FOR UPDATE;

-- write_centroid --
UPDATE language_centroids SET n = %(n)s, dense = %(dense)s, sparse = %(sparse)s
WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND language = %(language)s;

-- centroids --
SELECT language, n, dense, sparse FROM language_centroids
WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND n >= %(min_chunks)s;
