-- SPEC §10's search filters and §4 rule 3's searchable rule, as fragments composed into other
-- statements by search_filters.py: {d}, {c}, {document}, {chunk}, {column} are identifiers (table
-- aliases, column names) composed with psycopg.sql; {kb} is a placeholder; values are parameters.

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

-- filter_heading --
array_to_string({c}.heading_path, ' / ') ILIKE %(f_heading)s

-- vector_rows_of_documents --
{column} IN (SELECT d.id FROM documents d WHERE d.knowledge_base_id = {kb} AND {conditions})

-- vector_rows_of_chunks --
{column} IN (SELECT c.id FROM chunks c WHERE c.knowledge_base_id = {kb} AND {condition})

-- matching_document_ids --
SELECT d.id FROM documents d WHERE d.knowledge_base_id = %(kb)s AND {searchable}{conditions}
