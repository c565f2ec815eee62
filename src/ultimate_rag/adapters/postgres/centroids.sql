-- Language centroids: per knowledge base, model and script language, the running sum and count of
-- the chunks' dense and sparse vectors. Loaded by name ("-- name --" headers). Sums added before
-- migration 0019 are float32 bytes (dense, sparse); since, pgvector vectors the database adds to
-- (dense_sum; the sparse sum in two halves, sparse_low and sparse_high).

-- add_shares --
-- A published revision's shares, one a language, recorded (language_shares: migration 0023's trigger
-- takes them out again when the revision stops being the published one) and added to the sums, in
-- one statement: the chunk count, the sum of the dense vectors, the sum of the sparse ones in two
-- halves (NULL arrays when no chunk has one: the sparse sums stay as they are). Only while
-- %(revision)s is the document's published revision, under its row lock, and only shares not
-- recorded yet (a second call adds nothing). A missing row is made; the knowledge base's corpus lock
-- first (every writer of the sums takes it: they take turns). A row whose dense sum has another
-- dimension (the same model name serving another width) is left alone and reported
-- (added false): the caller starts it over (reset_centroid).
WITH doc AS (
    SELECT d.id FROM documents d WHERE d.id = %(document_id)s AND d.published_revision = %(revision)s FOR SHARE
), locked AS (
    SELECT pg_advisory_xact_lock(ultimate_rag_corpus_lock(%(kb)s)) FROM doc
), shares AS (
    INSERT INTO language_shares (document_id, revision, knowledge_base_id, model, language, n, dense_sum,
                                 sparse_low, sparse_high)
    SELECT %(document_id)s, %(revision)s, %(kb)s, %(model)s, s.language, s.n, s.dense, s.sparse_low, s.sparse_high
    FROM locked, unnest(%(languages)s::text[], %(counts)s::bigint[], %(dense)b::vector[], %(sparse_low)b::vector[],
                        %(sparse_high)b::vector[]) AS s(language, n, dense, sparse_low, sparse_high)
    ORDER BY s.language
    ON CONFLICT DO NOTHING
    RETURNING language, n, dense_sum, sparse_low, sparse_high
), added AS (
    INSERT INTO language_centroids AS t (knowledge_base_id, model, language, n, dense, sparse,
                                         dense_sum, sparse_low, sparse_high)
    SELECT %(kb)s, %(model)s, s.language, s.n, '\x', '\x', s.dense_sum, s.sparse_low, s.sparse_high
    FROM shares s ORDER BY s.language
    ON CONFLICT (knowledge_base_id, model, language) DO UPDATE
    SET n = t.n + EXCLUDED.n,
        dense_sum = coalesce(t.dense_sum + EXCLUDED.dense_sum, t.dense_sum, EXCLUDED.dense_sum),
        sparse_low = coalesce(t.sparse_low + EXCLUDED.sparse_low, t.sparse_low, EXCLUDED.sparse_low),
        sparse_high = coalesce(t.sparse_high + EXCLUDED.sparse_high, t.sparse_high, EXCLUDED.sparse_high)
    WHERE CASE WHEN t.dense_sum IS NULL THEN octet_length(t.dense) IN (0, 4 * vector_dims(EXCLUDED.dense_sum))
               ELSE vector_dims(t.dense_sum) = vector_dims(EXCLUDED.dense_sum) END
    RETURNING t.language
)
SELECT s.language, EXISTS (SELECT 1 FROM added a WHERE a.language = s.language) AS added FROM shares s;

-- reset_centroid --
-- A language row that starts over from one share (its dense sums had another dimension).
UPDATE language_centroids
SET n = %(n)s, dense = '\x', sparse = '\x', dense_sum = %(dense)b, sparse_low = %(sparse_low)b,
    sparse_high = %(sparse_high)b
WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND language = %(language)s;

-- centroids --
SELECT language, n, dense, sparse, dense_sum, sparse_low, sparse_high FROM language_centroids
WHERE knowledge_base_id = %(kb)s AND model = %(model)s AND n >= %(min_chunks)s;
