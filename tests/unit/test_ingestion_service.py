"""``submit`` over in-memory fakes of its ports (document intake, object storage, parsers): validation before anything is stored, the object stored under a system key, and
the compensation that removes it when the commit fails. The real-database path is covered by the
integration tests (``tests/integration/test_api.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from ultimate_rag.domain.errors import ConflictError, FileTooLargeError, InvalidRequestError, UnsupportedFormatError
from ultimate_rag.domain.models import Document, DocumentSource, KnowledgeBase, KnowledgeBaseSettings
from ultimate_rag.domain.status import DocumentStatus
from ultimate_rag.services.ingestion import IngestionService

KB_ID = uuid4()


def knowledge_base(deleting: bool = False) -> KnowledgeBase:
    return KnowledgeBase(id=KB_ID, name="kb", description="", settings=KnowledgeBaseSettings(),
                         created_at=datetime.now(UTC), deleting=deleting)


KB = knowledge_base()


@dataclass
class MemoryIntake:
    fail_with: BaseException | None = None
    created: list[dict[str, Any]] = field(default_factory=list)

    async def create_with_job(self, **fields: Any) -> Document:
        if self.fail_with:
            raise self.fail_with
        self.created.append(fields)
        now = datetime.now(UTC)
        return Document(id=fields["document_id"], knowledge_base_id=fields["knowledge_base_id"],
                        filename=fields["filename"], mime_type=fields["mime_type"], size_bytes=fields["size_bytes"],
                        sha256=fields["sha256"], object_key=fields["object_key"], status=DocumentStatus.PENDING,
                        error_message=None, progress={}, parser_name=None, parser_version=None, chunk_count=0,
                        content_revision=1, source=fields.get("source") or {}, duplicate_of=None, stage_timings={},
                        created_at=now, updated_at=now)


@dataclass
class MemoryStorage:
    objects: dict[str, bytes] = field(default_factory=dict)

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        self.objects[key] = data

    async def delete(self, key: str) -> None:
        self.objects.pop(key, None)


class TextOnly:
    name = "text"

    def resolve(self, source: DocumentSource) -> Any:
        if not source.filename.endswith(".txt"):
            raise UnsupportedFormatError("unsupported")
        return self

    def mime_type(self, parser: Any, source: DocumentSource) -> str:
        return "text/plain"


def service(intake: MemoryIntake | None = None, storage: MemoryStorage | None = None) -> IngestionService:
    return IngestionService(documents=intake or MemoryIntake(),
                            storage=storage or MemoryStorage(),  # type: ignore[arg-type]  # the fake: the calls submit makes
                            parsers=TextOnly(),  # type: ignore[arg-type]  # the fake: resolve and mime_type only
                            max_upload_bytes=100, max_filename_length=50, max_attempts=3)


async def test_submit_stores_the_bytes_then_creates_document_and_job() -> None:
    intake, storage = MemoryIntake(), MemoryStorage()
    doc = await service(intake=intake, storage=storage).submit(KB, "../notes.txt", "text/plain", b"hello",
                                                               uploaded_by="a1b2c3d4")
    assert doc.filename == "notes.txt" and doc.status == DocumentStatus.PENDING
    [created] = intake.created
    assert created["max_attempts"] == 3 and created["size_bytes"] == 5 and created["uploaded_by"] == "a1b2c3d4"
    assert storage.objects == {created["object_key"]: b"hello"}
    assert created["object_key"].startswith(f"{KB_ID}/{created['document_id']}/")


@pytest.mark.parametrize(("filename", "content", "error"), [
    ("big.txt", b"x" * 101, FileTooLargeError), ("", b"x", InvalidRequestError),
    ("a\x07.txt", b"x", InvalidRequestError), ("image.png", b"x", UnsupportedFormatError),
])
async def test_bad_input_is_refused_before_anything_is_stored(filename: str, content: bytes,
                                                              error: type[Exception]) -> None:
    storage = MemoryStorage()
    with pytest.raises(error):
        await service(storage=storage).submit(KB, filename, None, content)
    assert storage.objects == {}


async def test_a_knowledge_base_being_deleted_refuses_uploads() -> None:
    storage = MemoryStorage()
    with pytest.raises(ConflictError):
        await service(storage=storage).submit(knowledge_base(deleting=True), "a.txt", None, b"x")
    assert storage.objects == {}


async def test_a_failed_commit_removes_the_stored_object() -> None:
    storage = MemoryStorage()
    with pytest.raises(ConflictError):
        await service(intake=MemoryIntake(fail_with=ConflictError("being deleted")), storage=storage) \
            .submit(KB, "a.txt", None, b"x")
    assert storage.objects == {}


async def test_an_upload_refused_for_a_database_outage_leaves_no_directory_behind(tmp_path) -> None:
    """The API answers 503 when the commit fails for an outage; the stored object is removed, and
    with it the document's directory on the local storage (no empty directory per refused upload)."""
    import psycopg

    from ultimate_rag.adapters.storage.local import LocalObjectStorage

    storage = LocalObjectStorage(tmp_path / "objects")
    kept = await service(storage=storage).submit(KB, "kept.txt", None, b"an earlier upload")  # type: ignore[arg-type]  # no content type: as a client may send
    outage = MemoryIntake(fail_with=psycopg.OperationalError("the database is unavailable"))
    with pytest.raises(psycopg.OperationalError):
        await service(intake=outage, storage=storage).submit(KB, "a.txt", None, b"x")  # type: ignore[arg-type]  # no content type: as a client may send
    left = sorted(str(p.relative_to(tmp_path / "objects")) for p in (tmp_path / "objects").rglob("*"))
    assert left == [str(KB_ID), f"{KB_ID}/{kept.id}", kept.object_key], left
