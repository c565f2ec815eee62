-- Hybrid search (SPEC §10): the learned sparse vector of each chunk ("latent terms" of the local
-- e5 model's sparse head, 16384 dimensions, at most 256 non-zero), beside the dense vectors of
-- every vector store. Always in PostgreSQL: pgvector fuses both in one query; with Milvus or
-- Qdrant the dense side is theirs and the sparse side is read from here.
CREATE TABLE chunk_sparse_vectors (
    chunk_id           uuid PRIMARY KEY,
    document_id        uuid NOT NULL,
    knowledge_base_id  uuid NOT NULL,
    embedding          sparsevec(16384) NOT NULL
);
CREATE INDEX chunk_sparse_vectors_document_idx ON chunk_sparse_vectors (document_id);
CREATE INDEX chunk_sparse_vectors_kb_idx ON chunk_sparse_vectors (knowledge_base_id);
CREATE INDEX chunk_sparse_vectors_hnsw_idx ON chunk_sparse_vectors USING hnsw (embedding sparsevec_cosine_ops);

-- Sparse vectors go through the embedding cache like dense ones: an entry holds one or the other
-- (the sparse model has its own name in ``model``).
ALTER TABLE embedding_cache ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE embedding_cache ADD COLUMN sparse sparsevec;
ALTER TABLE embedding_cache ADD CONSTRAINT embedding_cache_one_vector
    CHECK (embedding IS NOT NULL OR sparse IS NOT NULL);

-- Chunks of documents that were READY before this migration get their sparse vectors from the
-- worker's backfill (no manual step); until then they are found by their dense vector alone.

-- Cross-language retrieval: per knowledge base, model and script language, the sum of the chunks'
-- dense and sparse vectors (float32, little-endian) and their count. Search subtracts each
-- language's mean similarity to the query (see domain/search.py, language centring), so a question
-- in one language is not pulled towards every document written in its own language.
CREATE TABLE language_centroids (
    knowledge_base_id  uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    model              text NOT NULL,
    language           text NOT NULL,
    n                  bigint NOT NULL,
    dense              bytea NOT NULL,
    sparse             bytea NOT NULL,
    PRIMARY KEY (knowledge_base_id, model, language)
);
