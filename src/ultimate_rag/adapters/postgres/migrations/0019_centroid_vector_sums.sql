-- Language centroids summed by the database: the READY commit adds a document's share in one
-- statement (pgvector's + on vectors) instead of reading each sum and writing it back. The bytea
-- sums (dense, sparse) keep what was added before this migration; what is added from now on goes
-- to dense_sum and, for the 16,384-wide sparse sum (wider than the 16,000 dimensions a pgvector
-- vector holds), to sparse_low and sparse_high (its first and its last 8,192 indexes). A mean is
-- the two parts' sum over n (centroids.py).
ALTER TABLE language_centroids
    ADD COLUMN dense_sum vector,
    ADD COLUMN sparse_low vector,
    ADD COLUMN sparse_high vector;
