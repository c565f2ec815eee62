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
