-- Deduplication (SPEC §8): each document's normalized-text hash and MinHash signature, its LSH
-- bands in a table every worker can look up, and the verdict shown on the document.

ALTER TABLE documents ADD COLUMN content_hash text;
ALTER TABLE documents ADD COLUMN minhash bigint[];
ALTER TABLE documents ADD COLUMN dedup jsonb NOT NULL DEFAULT '{}'::jsonb;
-- documents a reindexed OUTDATED document must not be outdated against again
ALTER TABLE documents ADD COLUMN dedup_exempt uuid[] NOT NULL DEFAULT '{}';
CREATE INDEX documents_kb_content_hash_idx ON documents (knowledge_base_id, content_hash)
    WHERE content_hash IS NOT NULL;

CREATE TABLE document_hash_bands (
    document_id       uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    knowledge_base_id uuid NOT NULL,
    band              smallint NOT NULL,
    hash              bigint NOT NULL,
    PRIMARY KEY (document_id, band)
);
CREATE INDEX document_hash_bands_lookup_idx ON document_hash_bands (knowledge_base_id, band, hash);
