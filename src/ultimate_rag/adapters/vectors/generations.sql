-- Index generations (generations.py). {table} is an identifier composed with psycopg.sql; values are
-- parameters. generation_tables runs as it is (its pattern's braces are not placeholders).

-- generation_tables --
SELECT tablename FROM pg_tables WHERE tablename ~ '^cv_[0-9a-f]{32}_g[0-9]+$'

-- drop_table --
DROP TABLE IF EXISTS {table}

-- document_knowledge_base --
SELECT knowledge_base_id FROM documents WHERE id = %s
