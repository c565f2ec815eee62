-- BM25, the lexical side of search (domain/lexical.py, docs/search.md), in PostgreSQL for every
-- vector store. Each chunk's BM25 term weights are a sparsevec over hashed term indexes, its term
-- indexes an int4[] under GIN (the inverted index that gives the candidates); the query side's IDF
-- comes from each knowledge base's document frequencies, kept here as the published revisions'
-- sum.
CREATE TABLE chunk_lexical_vectors (
    chunk_id           uuid PRIMARY KEY,
    document_id        uuid NOT NULL,
    knowledge_base_id  uuid NOT NULL,
    terms              int4[] NOT NULL,
    weights            sparsevec(536870912) NOT NULL
);
CREATE INDEX chunk_lexical_vectors_document_idx ON chunk_lexical_vectors (document_id);
CREATE INDEX chunk_lexical_vectors_terms_idx ON chunk_lexical_vectors USING gin (terms);

-- A document revision's share of its knowledge base's statistics: how many chunks it has and, per
-- term, in how many of them the term occurs. Written with the revision's vectors (before the READY
-- commit), added to the sums when the revision becomes the published one and taken out when it
-- stops being it (the trigger below), so the sums are always those of the published revisions —
-- whatever unpublishes a revision: a newer one, a delete, deduplication, a knowledge base's removal.
CREATE TABLE lexical_shares (
    document_id        uuid NOT NULL,
    revision           integer NOT NULL,
    knowledge_base_id  uuid NOT NULL,
    chunks             integer NOT NULL,
    terms              int4[] NOT NULL,
    counts             int4[] NOT NULL,
    PRIMARY KEY (document_id, revision)
);

CREATE TABLE lexical_document_frequencies (
    knowledge_base_id  uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    term               int4 NOT NULL,
    df                 bigint NOT NULL,
    PRIMARY KEY (knowledge_base_id, term)
);

CREATE TABLE lexical_corpus (
    knowledge_base_id  uuid PRIMARY KEY REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    chunks             bigint NOT NULL
);

-- Every writer of a knowledge base's corpus statistics (these sums, the language centroids) takes
-- this lock first, so they take turns instead of locking each other's rows in different orders.
CREATE FUNCTION ultimate_rag_corpus_lock(kb uuid) RETURNS bigint LANGUAGE sql IMMUTABLE
    AS $$ SELECT hashtextextended('ultimate_rag.corpus:' || kb::text, 7) $$;

-- Add (sign 1) or take out (sign -1) a revision's share; taking out only changes rows that are there
-- (a knowledge base being removed may have lost them first).
CREATE FUNCTION ultimate_rag_lexical_share(kb uuid, doc uuid, rev integer, sign integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    share lexical_shares%ROWTYPE;
BEGIN
    SELECT * INTO share FROM lexical_shares WHERE document_id = doc AND revision = rev;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(ultimate_rag_corpus_lock(kb));
    IF sign > 0 THEN
        INSERT INTO lexical_document_frequencies AS f (knowledge_base_id, term, df)
        SELECT kb, u.term, u.n FROM unnest(share.terms, share.counts) AS u(term, n) ORDER BY u.term
        ON CONFLICT (knowledge_base_id, term) DO UPDATE SET df = f.df + EXCLUDED.df;
        INSERT INTO lexical_corpus AS c (knowledge_base_id, chunks) VALUES (kb, share.chunks)
        ON CONFLICT (knowledge_base_id) DO UPDATE SET chunks = c.chunks + EXCLUDED.chunks;
    ELSE
        UPDATE lexical_document_frequencies f SET df = f.df - u.n
        FROM unnest(share.terms, share.counts) AS u(term, n)
        WHERE f.knowledge_base_id = kb AND f.term = u.term;
        DELETE FROM lexical_document_frequencies WHERE knowledge_base_id = kb AND term = ANY(share.terms) AND df <= 0;
        UPDATE lexical_corpus SET chunks = chunks - share.chunks WHERE knowledge_base_id = kb;
    END IF;
END;
$$;

-- The published revision changed (or the document is gone): the old one's share out, the new one's in.
CREATE FUNCTION ultimate_rag_lexical_publication() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.published_revision IS NOT NULL THEN
        PERFORM ultimate_rag_lexical_share(OLD.knowledge_base_id, OLD.id, OLD.published_revision, -1);
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM lexical_shares WHERE document_id = OLD.id;
        RETURN NULL;
    END IF;
    IF OLD.published_revision IS NOT NULL THEN
        DELETE FROM lexical_shares WHERE document_id = OLD.id AND revision = OLD.published_revision;
    END IF;
    IF NEW.published_revision IS NOT NULL THEN
        PERFORM ultimate_rag_lexical_share(NEW.knowledge_base_id, NEW.id, NEW.published_revision, 1);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER documents_lexical_publication AFTER UPDATE OF published_revision ON documents
    FOR EACH ROW WHEN (OLD.published_revision IS DISTINCT FROM NEW.published_revision)
    EXECUTE FUNCTION ultimate_rag_lexical_publication();
CREATE TRIGGER documents_lexical_removal AFTER DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION ultimate_rag_lexical_publication();

-- Chunks published before this migration get their lexical vectors and their documents' shares
-- from the worker's idle backfill (services/backfill.py); until then they are found by their
-- dense and learned sparse vectors.
