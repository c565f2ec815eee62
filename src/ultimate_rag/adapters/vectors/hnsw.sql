-- How a k-nearest query walks an HNSW index (sparse_pg.knn, PgVectorStore._side): the filters apply
-- during the walk (iterative scan, pgvector >= 0.8); a short answer is run again without the index.
-- {ef_search} is a literal composed with psycopg.sql.

-- iterative_scan --
SET LOCAL hnsw.iterative_scan = relaxed_order

-- ef_search --
SET LOCAL hnsw.ef_search = {ef_search}

-- exact_scan --
SET LOCAL enable_indexscan = off

-- index_scan --
SET LOCAL enable_indexscan = on
