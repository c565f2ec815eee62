-- Document change events (migration 0003) only while someone listens. A NOTIFY makes the commit of
-- its transaction take the server's one notification-queue lock and holds it through the commit's
-- WAL flush: every document update then commits one after the other, and on a busy pipeline that
-- serialisation cost more than the updates themselves (8 writers: 3,750 updates/s against 9,700
-- without it; bench/RESULTS.md). The API's event hub registers here while it has subscribers
-- (events.py: a row it refreshes, with an expiry, so a hub that died stops counting soon); with
-- no live registration the trigger sends nothing.
--
-- No event is lost when a hub registers while documents change: the trigger takes the events lock
-- in shared mode (held until its transaction ends) before it reads the registrations with a
-- snapshot of its own (a volatile function's statement), and a registering hub takes the same
-- lock exclusively after its row committed (and after its LISTEN), so it waits for every writer
-- that may have read "nobody listens" to commit; every later writer sees the row and notifies.
CREATE TABLE document_event_listeners (
    id         uuid PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

-- the key of the events lock: one definition for the trigger and the hub (events.sql)
CREATE FUNCTION ultimate_rag_document_events_lock() RETURNS bigint LANGUAGE sql IMMUTABLE
    AS $$ SELECT hashtextextended('ultimate_rag.document_events', 7) $$;

CREATE OR REPLACE FUNCTION ultimate_rag_notify_document() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    row_ documents%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(ultimate_rag_document_events_lock());
    IF NOT EXISTS (SELECT 1 FROM document_event_listeners WHERE expires_at > now()) THEN
        RETURN NULL;
    END IF;
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
