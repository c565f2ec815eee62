-- Document change events for the workbench's live view: every writer (API, workers, janitor, a
-- person with psql) that inserts, deletes, or changes a document's status, progress, error or chunk
-- count notifies 'ultimate_rag_documents' with a small JSON payload. Delivered at commit; readers
-- fetch the document itself for the details.

CREATE FUNCTION ultimate_rag_notify_document() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    row_ documents%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        row_ := OLD;
    ELSE
        row_ := NEW;
    END IF;
    PERFORM pg_notify('ultimate_rag_documents', json_build_object(
        'kb', row_.knowledge_base_id, 'id', row_.id,
        'status', CASE WHEN TG_OP = 'DELETE' THEN 'REMOVED' ELSE row_.status END,
        'op', left(TG_OP, 1))::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER documents_notify_insert_delete AFTER INSERT OR DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION ultimate_rag_notify_document();

CREATE TRIGGER documents_notify_update AFTER UPDATE ON documents
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       OR OLD.progress IS DISTINCT FROM NEW.progress
                       OR OLD.error_message IS DISTINCT FROM NEW.error_message
                       OR OLD.chunk_count IS DISTINCT FROM NEW.chunk_count
                       OR OLD.filename IS DISTINCT FROM NEW.filename)
    EXECUTE FUNCTION ultimate_rag_notify_document();
