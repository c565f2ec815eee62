-- 1. The embedding cache belongs to one knowledge base. Shared by all of them it was an oracle: a
-- document's progress says how many of its chunks came from the cache, so an editor of one knowledge
-- base could confirm an exact sentence of another by uploading guesses. Keyed by knowledge base, no
-- signal a key sees depends on another knowledge base's content; the entries go with their knowledge
-- base (ON DELETE CASCADE); ``last_used_at`` lets the janitor evict the least recently used entries
-- beyond ULTIMATE_RAG_EMBEDDING_CACHE_MAX_ENTRIES.
ALTER TABLE embedding_cache RENAME TO embedding_cache_shared;
ALTER TABLE embedding_cache_shared RENAME CONSTRAINT embedding_cache_pkey TO embedding_cache_shared_pkey;

CREATE TABLE embedding_cache (
    knowledge_base_id  uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    model              text NOT NULL,
    text_hash          bytea NOT NULL,
    embedding          vector NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_used_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (knowledge_base_id, model, text_hash)
);
CREATE INDEX embedding_cache_last_used_idx ON embedding_cache (last_used_at);

-- keep each entry for the knowledge bases whose own chunks hold that text (a re-ingest after the
-- upgrade still hits the cache); entries no chunk vouches for are dropped
INSERT INTO embedding_cache (knowledge_base_id, model, text_hash, embedding, created_at, last_used_at)
SELECT c.knowledge_base_id, s.model, s.text_hash, s.embedding, s.created_at, s.created_at
FROM (SELECT DISTINCT knowledge_base_id, sha256(convert_to(content, 'UTF8')) AS text_hash FROM chunks) c
JOIN embedding_cache_shared s ON s.text_hash = c.text_hash
ON CONFLICT DO NOTHING;

DROP TABLE embedding_cache_shared;

-- 2. A re-upload holds its document in UPLOADING under a lease: ``upload_expires_at`` (the API's
-- upload deadline, ULTIMATE_RAG_UPLOAD_LEASE_SECONDS) and ``upload_lease`` (the upload's token and
-- the status and error message to restore). A worker's claim puts an expired one back where it was.
ALTER TABLE documents ADD COLUMN upload_expires_at timestamptz, ADD COLUMN upload_lease jsonb;
CREATE INDEX documents_upload_expiry_idx ON documents (upload_expires_at) WHERE status = 'UPLOADING';

-- documents a crashed API left UPLOADING before this version recorded no previous status: they fail
-- with a readable reason (their chunks go, as for any FAILED document); a reindex uses the previous
-- content, which is still the recorded source
DELETE FROM chunks WHERE document_id IN (SELECT id FROM documents WHERE status = 'UPLOADING');
UPDATE documents
SET status = 'FAILED', chunk_count = 0, progress = '{}'::jsonb, updated_at = now(),
    error_message = 'the re-upload was interrupted before its content was stored; reindex to use the previous content'
WHERE status = 'UPLOADING';
