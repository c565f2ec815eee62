-- A bulk reindex queues a knowledge base's documents in batches, after stamping the knowledge base
-- (rebuild_started_at): until its last batch, the progress must not read "finished" (nothing of the
-- new rebuild pending yet). rebuild_queued_at is set when the last batch is queued; NULL meanwhile.
ALTER TABLE knowledge_bases ADD COLUMN rebuild_queued_at timestamptz;
UPDATE knowledge_bases SET rebuild_queued_at = rebuild_started_at WHERE rebuild_started_at IS NOT NULL;
