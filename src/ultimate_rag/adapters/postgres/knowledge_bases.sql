-- Knowledge-base rows. Loaded by name ("-- name --" headers).

-- insert_knowledge_base --
-- Names are unique: a taken one raises UniqueViolation (a 409 for the caller).
INSERT INTO knowledge_bases (id, name, description, settings)
VALUES (%(id)s, %(name)s, %(description)s, %(settings)s)
RETURNING *;

-- get_knowledge_base --
SELECT * FROM knowledge_bases WHERE id = %(id)s;

-- list_knowledge_bases --
SELECT * FROM knowledge_bases ORDER BY created_at, id;

-- status_counts --
SELECT status, count(*) AS n FROM documents WHERE knowledge_base_id = %(id)s GROUP BY status;

-- status_counts_of_many --
-- The same for several knowledge bases in one statement (the list): an index-only count on
-- documents_kb_status_idx.
SELECT knowledge_base_id, status, count(*) AS n FROM documents WHERE knowledge_base_id = ANY(%(ids)s)
GROUP BY knowledge_base_id, status;
