-- Every foreign key pointing at documents or connectors gets an index on its referencing column:
-- without one, deleting a document (ON DELETE SET NULL on duplicate_of) or a connector scans the
-- whole documents table once per deleted row, which turns a knowledge-base delete quadratic.
CREATE INDEX documents_duplicate_of_idx ON documents (duplicate_of) WHERE duplicate_of IS NOT NULL;
CREATE INDEX documents_connector_idx ON documents (connector_id) WHERE connector_id IS NOT NULL;

-- "stuck" documents (active for too long) without scanning the finished ones
CREATE INDEX documents_active_updated_idx ON documents (updated_at)
    WHERE status IN ('UPLOADING', 'FETCHING', 'PENDING', 'PARSING', 'CHUNKING', 'EMBEDDING', 'INDEXING', 'DELETING');
