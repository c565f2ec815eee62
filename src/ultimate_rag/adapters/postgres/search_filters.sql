-- SPEC §10's search filters and §4 rule 3's searchable rule, as fragments composed into other
-- statements by search_filters.py: {d}, {c}, {document}, {chunk}, {column} are identifiers (table
-- aliases, column names) composed with psycopg.sql; {kb} is a placeholder; values are parameters.
--
-- filters.metadata (domain/metadata_filter.py, compiled by search_filters.metadata_condition) is
-- filter_metadata around metadata_* fragments joined with AND / OR: $eq, $in (one containment per
-- value) and $contains are JSON containment, which the GIN index on documents.metadata answers
-- (migration 0024); $ne and $nin are their negation, true where the field is missing too; a range
-- casts only a field of its own type (a number, or a string that metadata_instant() reads as an
-- ISO 8601 date), so another type never matches and is never an error. No comment inside a
-- fragment: fragments are composed into other statements.

-- searchable_document --
{document}.published_revision IS NOT NULL

-- searchable_chunk --
{chunk}.revision = {document}.published_revision

-- filter_document_ids --
{d}.id = ANY(%(f_document_ids)s)

-- filter_filename --
{d}.filename ~ %(f_filename)s

-- filter_mime_types --
{d}.mime_type = ANY(%(f_mime_types)s)

-- filter_created_after --
{d}.created_at >= %(f_created_after)s

-- filter_created_before --
{d}.created_at <= %(f_created_before)s

-- filter_updated_after --
{d}.updated_at >= %(f_updated_after)s

-- filter_updated_before --
{d}.updated_at <= %(f_updated_before)s

-- filter_connector_id --
{d}.connector_id = %(f_connector_id)s

-- filter_metadata --
({condition})

-- metadata_contains --
{d}.metadata @> {value}

-- metadata_not_contains --
NOT ({d}.metadata @> {value})

-- metadata_exists --
({d}.metadata #> {path}::text[]) IS NOT NULL

-- metadata_missing --
({d}.metadata #> {path}::text[]) IS NULL

-- metadata_number --
CASE WHEN jsonb_typeof({d}.metadata #> {path}::text[]) = 'number'
     THEN ({d}.metadata #> {path}::text[])::numeric {op} {value} ELSE false END

-- metadata_instant --
coalesce(metadata_instant({d}.metadata #> {path}::text[]) {op} {value}, false)

-- filter_heading --
array_to_string({c}.heading_path, ' / ') ILIKE %(f_heading)s

-- vector_rows_of_documents --
{column} IN (SELECT d.id FROM documents d WHERE d.knowledge_base_id = {kb} AND {conditions})

-- vector_rows_of_chunks --
{column} IN (SELECT c.id FROM chunks c WHERE c.knowledge_base_id = {kb} AND {condition})

-- matching_document_ids --
SELECT d.id FROM documents d WHERE d.knowledge_base_id = %(kb)s AND {searchable}{conditions}
