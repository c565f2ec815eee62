"""The JSON of a document, a connector and a sync (SPEC §11): the fields the API shares with the
domain and the rows are declared once (``DocumentFile``, ``Connector``, ``Sync``), and the answers
keep their keys, in this order, their values and their schema."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from uuid import uuid4

from ultimate_rag.api.routes.connectors import ConnectorOut, SyncOut
from ultimate_rag.api.schemas import DocumentOut
from ultimate_rag.domain.auth import Principal
from ultimate_rag.domain.connectors import Connector, Sync
from ultimate_rag.domain.models import Document, DocumentFile
from ultimate_rag.domain.redact import MASK
from ultimate_rag.domain.status import DocumentStatus, JobStatus

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
DOCUMENT_KEYS = ["id", "knowledge_base_id", "filename", "mime_type", "size_bytes", "sha256", "status",
                 "error_message", "attempts", "max_attempts", "job_status", "operation", "chunk_count", "progress",
                 "parser", "duplicate_of", "dedup", "content_revision", "published_revision", "searchable", "source",
                 "metadata", "warnings", "timings", "created_at", "updated_at", "indexed_at", "deleted_at",
                 "error_history"]
SYNC_KEYS = ["id", "connector_id", "trigger", "status", "attempts", "max_attempts", "counts", "errors", "error",
             "created_at", "started_at", "finished_at"]
CONNECTOR_KEYS = ["id", "knowledge_base_id", "kind", "name", "config", "schedule_seconds", "next_sync_at",
                  "created_at", "updated_at", "syncs"]


def test_a_document_answers_its_files_fields_first_then_the_apis() -> None:
    doc = Document(id=uuid4(), knowledge_base_id=uuid4(), filename="guide.md", mime_type="text/markdown",
                   size_bytes=42, sha256="ab" * 32, object_key="kb/doc", status=DocumentStatus.READY,
                   error_message=None, progress={}, parser_name="markdown", parser_version="1", chunk_count=3,
                   content_revision=2, source={"url": "https://user:secret@example.com/a.md"}, duplicate_of=None,
                   stage_timings={}, created_at=NOW, updated_at=NOW, job_status=JobStatus.SUCCEEDED,
                   published_revision=2)
    body = json.loads(DocumentOut.of(doc).model_dump_json())
    assert list(body) == DOCUMENT_KEYS
    assert [f.name for f in fields(DocumentFile)] == DOCUMENT_KEYS[:6]
    expected = {"id": str(doc.id), "knowledge_base_id": str(doc.knowledge_base_id), "filename": "guide.md",
                "mime_type": "text/markdown", "size_bytes": 42, "sha256": "ab" * 32, "status": "READY",
                "job_status": "SUCCEEDED", "parser": {"name": "markdown", "version": "1"}, "searchable": True,
                "created_at": "2026-01-02T03:04:05Z"}
    assert {k: body[k] for k in expected} == expected
    assert "secret" not in json.dumps(body["source"])
    schema = DocumentOut.model_json_schema()
    assert list(schema["properties"])[:6] == DOCUMENT_KEYS[:6] and set(DOCUMENT_KEYS[:6]) <= set(schema["required"])
    assert schema["properties"]["id"] == {"format": "uuid", "title": "Id", "type": "string"}
    assert schema["properties"]["size_bytes"] == {"title": "Size Bytes", "type": "integer"}
    assert "description" not in schema


def test_a_connector_and_its_syncs_answer_the_rows_fields_with_credentials_redacted() -> None:
    connector = Connector(id=uuid4(), knowledge_base_id=uuid4(), kind="urls", name="site",
                          config={"urls": ["https://example.com/"], "token": "s3cret"}, schedule_seconds=3600,
                          next_sync_at=None, created_at=NOW, updated_at=NOW)
    sync = Sync(id=uuid4(), connector_id=connector.id, trigger="manual", status="FAILED", attempts=1, max_attempts=3,
                counts={"new": 2}, errors=[{"url": "https://u:pw@example.com/x", "error": "404"}],
                error="https://u:pw@example.com/ refused", created_at=NOW, started_at=NOW, finished_at=None)
    body = json.loads(ConnectorOut.of(connector, Principal("reader"), [sync]).model_dump_json())
    assert list(body) == CONNECTOR_KEYS and list(body["syncs"][0]) == SYNC_KEYS
    assert body["config"] == {"urls": ["https://example.com/"], "token": MASK}
    assert body["schedule_seconds"] == 3600 and body["next_sync_at"] is None
    one = body["syncs"][0]
    assert one["counts"] == {"discovered": 0, "new": 2, "updated": 0, "unchanged": 0, "removed": 0, "failed": 0,
                             "skipped_active": 0}
    assert "pw" not in json.dumps(one["errors"]) + one["error"] and one["trigger"] == "manual"
    admin = json.loads(ConnectorOut.of(connector, Principal("admin", is_admin=True)).model_dump_json())
    assert admin["config"]["token"] == "s3cret" and admin["syncs"] is None
    assert list(SyncOut.model_json_schema()["properties"]) == SYNC_KEYS
    assert list(ConnectorOut.model_json_schema()["properties"]) == CONNECTOR_KEYS


def test_a_timeline_ends_with_the_status_the_writers_did_not_stamp() -> None:
    """FAILED (and a retry's PENDING) are not stamped in stage_timings: the timeline adds the status
    as of the last change, so the stage before it has an end and never reads as running."""
    from datetime import UTC, datetime

    from ultimate_rag.api.schemas import timings

    t0, t1 = "2026-01-01T10:00:00+00:00", "2026-01-01T10:00:05+00:00"
    failed_at = datetime(2026, 1, 1, 10, 0, 20, tzinfo=UTC)
    shown = timings({"PARSING": t0, "CHUNKING": t1}, "FAILED", failed_at)
    assert [(t.stage, t.seconds) for t in shown] == [("PARSING", 5.0), ("CHUNKING", 15.0), ("FAILED", None)]
    assert [t.stage for t in timings({"PENDING": t0}, "PENDING", failed_at)] == ["PENDING"]  # waiting: as it was
    running = timings({"PARSING": t0}, "PARSING", failed_at)
    assert [(t.stage, t.seconds) for t in running] == [("PARSING", None)]  # running now: truly
    assert [t.stage for t in timings({}, "FAILED", failed_at)] == ["FAILED"]
