-- The sparse backfill's read (migration 0015). Loaded by name ("-- name --" headers).

-- chunks_without_sparse --
-- The next %(n)s searchable chunks (their document's published revision: search_filters.py) after
-- chunk id %(after)s that have no sparse vector yet, in id order: the backfill walks the chunks once
-- per pass, keyed on the last id it saw.
SELECT c.id, c.document_id, c.knowledge_base_id, c.ordinal, c.content, c.heading_path,
       coalesce(k.settings->>'korean_terms', 'bigrams') AS korean_terms  -- as lexical_pg.sql reads it
FROM chunks c JOIN documents d ON d.id = c.document_id JOIN knowledge_bases k ON k.id = c.knowledge_base_id
WHERE c.revision = d.published_revision AND c.id > %(after)s
  AND NOT EXISTS (SELECT 1 FROM chunk_sparse_vectors s WHERE s.chunk_id = c.id)
ORDER BY c.id LIMIT %(n)s;

-- documents_without_lexical --
-- The next %(n)s documents (after %(after)s, in id order) whose published revision has no lexical
-- share yet (indexed before migration 0022), or no language share (before 0023): the backfill
-- writes their chunks' lexical vectors and the shares.
SELECT d.id, d.knowledge_base_id, d.published_revision AS revision,
       NOT EXISTS (SELECT 1 FROM lexical_shares s
                   WHERE s.document_id = d.id AND s.revision = d.published_revision) AS lexical,
       NOT EXISTS (SELECT 1 FROM language_shares s
                   WHERE s.document_id = d.id AND s.revision = d.published_revision) AS language
FROM documents d
WHERE d.published_revision IS NOT NULL AND d.id > %(after)s
  AND (NOT EXISTS (SELECT 1 FROM lexical_shares s WHERE s.document_id = d.id AND s.revision = d.published_revision)
       OR (%(with_language)s AND NOT EXISTS (SELECT 1 FROM language_shares s
                                               WHERE s.document_id = d.id AND s.revision = d.published_revision)))
ORDER BY d.id LIMIT %(n)s;

-- published_chunks --
-- A document's chunks of its published revision (%(revision)s), in order.
SELECT c.id, c.document_id, c.knowledge_base_id, c.ordinal, c.content, c.heading_path,
       coalesce(k.settings->>'korean_terms', 'bigrams') AS korean_terms  -- as lexical_pg.sql reads it
FROM chunks c JOIN knowledge_bases k ON k.id = c.knowledge_base_id
WHERE c.document_id = %(document_id)s AND c.revision = %(revision)s ORDER BY c.ordinal;
