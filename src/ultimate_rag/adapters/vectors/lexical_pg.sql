-- BM25 in PostgreSQL (lexical_pg.py, migration 0022). {where} is a filter fragment
-- (search_filters.py) on the rows' document_id and chunk_id; values are parameters.

-- upsert --
-- A document's chunks' lexical vectors and its revision's share of the knowledge base's statistics,
-- composed into the statement that writes the sparse vectors (pgvector.sql, sparse_pg.sql): hence
-- the parameters' own names. No share (lex_share_document NULL): only vectors.
lexical AS (
    INSERT INTO chunk_lexical_vectors (chunk_id, document_id, knowledge_base_id, terms, weights)
    SELECT v.chunk_id, v.document_id, %(kb)s, string_to_array(v.terms, ',')::int4[], v.weights
    FROM unnest(%(lex_chunk_ids)s::uuid[], %(lex_document_ids)s::uuid[], %(lex_terms)s::text[],
                %(lex_weights)b::sparsevec[]) AS v(chunk_id, document_id, terms, weights)
    ON CONFLICT (chunk_id) DO UPDATE SET terms = EXCLUDED.terms, weights = EXCLUDED.weights,
        document_id = EXCLUDED.document_id, knowledge_base_id = EXCLUDED.knowledge_base_id
), lexical_share AS (
    INSERT INTO lexical_shares (document_id, revision, knowledge_base_id, chunks, terms, counts)
    SELECT %(lex_share_document)s, %(lex_share_revision)s, %(kb)s, %(lex_share_chunks)s, %(lex_share_terms)s::int4[],
           %(lex_share_counts)s::int4[]
    WHERE %(lex_share_document)s::uuid IS NOT NULL
    ON CONFLICT (document_id, revision) DO UPDATE SET chunks = EXCLUDED.chunks, terms = EXCLUDED.terms,
        counts = EXCLUDED.counts
)

-- publish_share --
-- The backfill's share of a revision that is published already: written and added to the sums at
-- once, under the document's row lock (a swap or a delete waits, and then takes it out again), and
-- only while that revision is the published one and has no share yet.
WITH doc AS (
    SELECT d.id FROM documents d WHERE d.id = %(document_id)s AND d.published_revision = %(revision)s
      AND NOT EXISTS (SELECT 1 FROM lexical_shares s WHERE s.document_id = d.id AND s.revision = %(revision)s)
    FOR SHARE
), share AS (
    INSERT INTO lexical_shares (document_id, revision, knowledge_base_id, chunks, terms, counts)
    SELECT doc.id, %(revision)s, %(kb)s, %(chunks)s, %(terms)s::int4[], %(counts)s::int4[] FROM doc
    RETURNING document_id
)
SELECT ultimate_rag_lexical_share(%(kb)s, document_id, %(revision)s, 1) FROM share

-- delete_document --
DELETE FROM chunk_lexical_vectors WHERE document_id = %s

-- delete_document_except --
DELETE FROM chunk_lexical_vectors WHERE document_id = %s AND chunk_id <> ALL(%s)

-- delete_knowledge_base --
DELETE FROM chunk_lexical_vectors WHERE knowledge_base_id = %s

-- statistics --
-- The knowledge base's chunk count and the document frequencies of the query's terms.
SELECT (SELECT chunks FROM lexical_corpus WHERE knowledge_base_id = %(kb)s) AS chunks,
       coalesce((SELECT array_agg(term) FROM lexical_document_frequencies
                 WHERE knowledge_base_id = %(kb)s AND term = ANY(%(terms)s::int4[])), '{}') AS terms,
       coalesce((SELECT array_agg(df) FROM lexical_document_frequencies
                 WHERE knowledge_base_id = %(kb)s AND term = ANY(%(terms)s::int4[])), '{}') AS dfs

-- korean_terms --
-- How the knowledge base cuts Korean for BM25 (domain/lexical.py); one made before it was recorded:
-- bigrams (KnowledgeBaseSettings.from_dict agrees).
SELECT coalesce(settings->>'korean_terms', 'bigrams') AS korean_terms FROM knowledge_bases WHERE id = %(kb)s;

-- search --
-- The top %(n)s by BM25 among the chunks that contain one of the candidate terms (the GIN index):
-- the raw score (inner product of the chunk's weights and the query's IDFs).
SELECT chunk_id, -(weights <#> %(ql)s) AS score FROM chunk_lexical_vectors
WHERE terms && %(qt)s::int4[] AND knowledge_base_id = %(kb)s{where}
ORDER BY weights <#> %(ql)s, chunk_id LIMIT %(n)s

-- scores --
SELECT chunk_id, -(weights <#> %(ql)s) AS score FROM chunk_lexical_vectors WHERE chunk_id = ANY(%(ids)s)
