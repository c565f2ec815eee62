-- Identifier exactness (SPEC §10, docs/search.md "Identifiers"): each chunk's identifier keys (error
-- codes, tickets, part, clause and version numbers, folded as domain/identifiers.py says), written
-- with the chunk by the READY commit, looked up through a GIN index: a query naming an identifier
-- finds the chunks holding it without reading any content. NULL: not computed yet (chunks written
-- before this migration); an idle worker fills them in (services/backfill.py), and until then search
-- finds those chunks by their vectors alone.
ALTER TABLE chunks ADD COLUMN identifiers text[];
CREATE INDEX chunks_identifiers_idx ON chunks USING gin (identifiers);
-- the backfill walks the chunks still missing their keys, in id order, without reading the others
CREATE INDEX chunks_identifiers_missing_idx ON chunks (id) WHERE identifiers IS NULL;
