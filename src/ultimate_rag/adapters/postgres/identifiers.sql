-- The identifier index (identifiers.py; migration 0021): each chunk's identifier keys in
-- chunks.identifiers, a GIN index on them. {searchable} is search_filters' searchable_chunk and
-- {filters} " AND ..." for each search filter (or nothing); values are parameters.

-- lookup --
-- Per key of the query, up to %(n)s searchable chunks of the knowledge base holding it (a GIN index
-- probe per key: the chunks' contents are never read), under the same rule and filters as the
-- double filter. A key that no row comes back for is held by no chunk this search could return.
SELECT k.key, h.id
FROM unnest(%(keys)s::text[]) AS k(key)
CROSS JOIN LATERAL (
    SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id
    WHERE c.identifiers @> ARRAY[k.key] AND c.knowledge_base_id = %(kb)s AND d.knowledge_base_id = %(kb)s
      AND {searchable}{filters}
    LIMIT %(n)s
) h;

-- chunks_without_identifiers --
-- The identifier backfill's next batch: chunks written before migration 0021 (a partial index holds
-- exactly them, so a pass costs what is left, not the whole table).
SELECT c.id, c.content, c.heading_path FROM chunks c WHERE c.identifiers IS NULL ORDER BY c.id LIMIT %(n)s;

-- set_identifiers --
-- A batch of chunks' keys in one statement; a chunk the READY commit rewrote meanwhile keeps its own.
UPDATE chunks c SET identifiers = r.identifiers
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(id uuid, identifiers text[])
WHERE c.id = r.id AND c.identifiers IS NULL;
