-- The delete pipeline's reads (SPEC §6). Loaded by name ("-- name --" headers); run inside the
-- job's fenced transaction, so the rows cannot change while the objects they name are removed.

-- asset_keys --
SELECT object_key FROM document_assets WHERE document_id = %(id)s ORDER BY object_key;
