-- The audit log. Loaded by name ("-- name --" headers).

-- record --
INSERT INTO audit_log (key_prefix, action, knowledge_base_id, document_id, detail)
VALUES (%(key_prefix)s, %(action)s, %(kb)s, %(document_id)s, %(detail)s);

-- list --
-- Newest first; a page before %(before)s (an entry id) and of one knowledge base when those are
-- not NULL.
SELECT * FROM audit_log
WHERE (%(before)s::bigint IS NULL OR id < %(before)s::bigint)
  AND (%(kb)s::uuid IS NULL OR knowledge_base_id = %(kb)s::uuid)
ORDER BY id DESC LIMIT %(limit)s;
