-- Document metadata (SPEC §10, docs/metadata.md): each document's own fields, a JSON object the
-- user sets at upload and changes with PATCH, and whose reserved keys (doc, front_matter, s3,
-- source) parsers and connectors fill in. Search filters read it here, in PostgreSQL, for every
-- vector store: a change is one UPDATE, visible to the next search, and no vector is rewritten.
ALTER TABLE documents ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb;
-- filters.metadata's equality, membership and list-item conditions are JSON containment (@>)
CREATE INDEX documents_metadata_idx ON documents USING gin (metadata jsonb_path_ops);

-- The moment an ISO 8601 date or date-time names (a date is its midnight; no offset is UTC), or
-- NULL for anything else: what a range filter on dates compares. The same rule as
-- domain/metadata.py ``instant``.
CREATE FUNCTION metadata_instant(value jsonb) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    written text;
BEGIN
    IF jsonb_typeof(value) IS DISTINCT FROM 'string' THEN
        RETURN NULL;
    END IF;
    written := value #>> '{}';
    IF written !~ '^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$' THEN
        RETURN NULL;
    END IF;
    IF written ~ '^\d{4}-\d{2}-\d{2}$' THEN
        written := written || 'T00:00:00+00';
    ELSIF written !~ '(?:Z|[+-]\d{2}(?::?\d{2})?)$' THEN
        written := written || '+00';
    END IF;
    BEGIN
        RETURN written::timestamptz;
    EXCEPTION WHEN others THEN  -- a date that does not exist (2025-02-30)
        RETURN NULL;
    END;
END
$$;
