-- Language centroids that do not drift (docs/search.md): each published revision's share of the
-- sums is kept (per model and language: chunk count, dense sum, sparse sum in two halves), added
-- by the READY commit that publishes it (centroids.sql, add_shares) and taken out by the trigger
-- below when the revision stops being the published one — a newer revision's swap, a delete,
-- deduplication, the document's or its knowledge base's removal. The sums are then always those
-- of the published revisions: a document rebuilt 13 times counts once.
CREATE TABLE language_shares (
    document_id        uuid NOT NULL,
    revision           integer NOT NULL,
    knowledge_base_id  uuid NOT NULL,
    model              text NOT NULL,
    language           text NOT NULL,
    n                  bigint NOT NULL,
    dense_sum          vector NOT NULL,
    sparse_low         vector,
    sparse_high        vector,
    PRIMARY KEY (document_id, revision, model, language)
);

CREATE FUNCTION ultimate_rag_language_publication() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.published_revision IS NOT NULL
       AND EXISTS (SELECT 1 FROM language_shares WHERE document_id = OLD.id AND revision = OLD.published_revision) THEN
        PERFORM pg_advisory_xact_lock(ultimate_rag_corpus_lock(OLD.knowledge_base_id));
        UPDATE language_centroids t
        SET n = t.n - s.n,
            dense_sum = t.dense_sum - s.dense_sum,
            sparse_low = CASE WHEN s.sparse_low IS NULL THEN t.sparse_low ELSE t.sparse_low - s.sparse_low END,
            sparse_high = CASE WHEN s.sparse_high IS NULL THEN t.sparse_high ELSE t.sparse_high - s.sparse_high END
        FROM language_shares s
        WHERE s.document_id = OLD.id AND s.revision = OLD.published_revision
          AND t.knowledge_base_id = s.knowledge_base_id AND t.model = s.model AND t.language = s.language
          AND vector_dims(t.dense_sum) = vector_dims(s.dense_sum);
        DELETE FROM language_shares WHERE document_id = OLD.id AND revision = OLD.published_revision;
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM language_shares WHERE document_id = OLD.id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER documents_language_publication AFTER UPDATE OF published_revision ON documents
    FOR EACH ROW WHEN (OLD.published_revision IS DISTINCT FROM NEW.published_revision)
    EXECUTE FUNCTION ultimate_rag_language_publication();
CREATE TRIGGER documents_language_removal AFTER DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION ultimate_rag_language_publication();

-- The sums written before this migration include revisions no longer published, with no record
-- of their shares to take out: they start over. The worker's idle backfill adds each published
-- revision's share again (services/backfill.py); meanwhile search centres on the reference means
-- shipped with the product (domain/language_prior.py), as it does for a new knowledge base.
DELETE FROM language_centroids;
