-- The hybrid-search contract's rows (hybrid_contract.py): a READY document, published, and its
-- chunks, written directly since the search filters read them there. Values are parameters.

-- add_knowledge_base --
INSERT INTO knowledge_bases (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING

-- add_document --
INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256,
    object_key, status, published_revision, metadata)
VALUES (%s, %s, %s, %s, 1, 'x', 'x', 'READY', 1, %s)

-- set_metadata --
UPDATE documents SET metadata = %s WHERE id = %s

-- add_chunk --
-- identifiers: the chunk's identifier keys as the READY commit writes them (domain/identifiers.py)
INSERT INTO chunks (id, document_id, knowledge_base_id, ordinal, content, token_count, heading_path, identifiers)
VALUES (%s, %s, %s, %s, %s, 1, %s, %s)
