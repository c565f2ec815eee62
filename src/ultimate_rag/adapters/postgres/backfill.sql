-- The sparse backfill's read (migration 0015). Loaded by name ("-- name --" headers).

-- chunks_without_sparse --
-- The next %(n)s searchable chunks (their document's published revision: search_filters.py) after
-- chunk id %(after)s that have no sparse vector yet, in id order: the backfill walks the chunks once
-- per pass, keyed on the last id it saw.
SELECT c.id, c.document_id, c.knowledge_base_id, c.ordinal, c.content, c.heading_path
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.revision = d.published_revision AND c.id > %(after)s
  AND NOT EXISTS (SELECT 1 FROM chunk_sparse_vectors s WHERE s.chunk_id = c.id)
ORDER BY c.id LIMIT %(n)s;
