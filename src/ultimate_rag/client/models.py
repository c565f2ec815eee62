"""Typed results of the client. Each keeps the server's full JSON in ``raw``, so a field added by a
newer server is never lost to an older client."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

# what the package exports (client/__init__.py)
__all__ = ["Answer", "AnswerCitation", "Chunk", "Citation", "Document", "EmbeddingMigration", "KnowledgeBase", "Page",
           "ReindexResult", "SearchHit", "SearchResults"]

T = TypeVar("T")

STABLE_STATUSES = frozenset({"READY", "FAILED", "DELETED", "OUTDATED"})


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class KnowledgeBase:
    id: str
    name: str
    description: str = ""
    document_counts: dict[str, int] | None = None
    deleting: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KnowledgeBase:
        return cls(id=str(d["id"]), name=d["name"], description=d.get("description") or "",
                   document_counts=d.get("document_counts"), deleting=bool(d.get("deleting")), raw=d)


@dataclass(frozen=True)
class Document:
    id: str
    knowledge_base_id: str
    filename: str
    status: str
    sha256: str = ""
    size_bytes: int = 0
    mime_type: str = ""
    error_message: str | None = None
    chunk_count: int = 0
    attempts: int = 0
    progress: dict[str, Any] = field(default_factory=dict)
    duplicate_of: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    searchable: bool = False  # search serves its published revision (also while a rebuild runs or after one failed)
    published_revision: int | None = None
    content_revision: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)  # its own fields (docs/metadata.md)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_stable(self) -> bool:
        """READY, FAILED, DELETED or OUTDATED: nothing is running on it."""
        return self.status in STABLE_STATUSES

    @property
    def source_path(self) -> str | None:
        """Where it lies in the folder or bucket it came from (its metadata's ``source.path``); None
        for a single upload."""
        source = self.metadata.get("source")
        path = source.get("path") if isinstance(source, dict) else None
        return path if isinstance(path, str) and path else None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Document:
        return cls(id=str(d["id"]), knowledge_base_id=str(d["knowledge_base_id"]), filename=d["filename"],
                   status=d["status"], sha256=d.get("sha256") or "", size_bytes=int(d.get("size_bytes") or 0),
                   mime_type=d.get("mime_type") or "", error_message=d.get("error_message"),
                   chunk_count=int(d.get("chunk_count") or 0), attempts=int(d.get("attempts") or 0),
                   progress=d.get("progress") or {},
                   duplicate_of=str(d["duplicate_of"]) if d.get("duplicate_of") else None,
                   created_at=_time(d.get("created_at")), updated_at=_time(d.get("updated_at")),
                   searchable=bool(d.get("searchable")), published_revision=d.get("published_revision"),
                   content_revision=int(d.get("content_revision") or 1), metadata=d.get("metadata") or {}, raw=d)


@dataclass(frozen=True)
class Citation:
    """Where a passage comes from: the file (by its path in the folder it was uploaded from, when
    it has one), its heading path and its page (or pages), table and rows, lines or paragraphs,
    and anchor."""

    document_id: str
    filename: str
    heading_path: list[str]
    locator: dict[str, Any]
    source_path: str | None = None

    @property
    def page(self) -> int | None:
        return self.locator.get("page") or self.locator.get("page_start")

    def __str__(self) -> str:
        parts = [self.source_path or self.filename]
        if self.heading_path:
            parts.append(" > ".join(self.heading_path))
        loc = self.locator
        if loc.get("page_start") and loc.get("page_end") and loc["page_end"] != loc["page_start"]:
            parts.append(f"pages {loc['page_start']}-{loc['page_end']}")
        elif self.page:
            parts.append(f"page {self.page}")
        if loc.get("table"):
            parts.append(f"table {loc['table']}")
        if loc.get("row_start"):
            parts.append(_span("row", loc["row_start"], loc.get("row_end")))
        elif not self.page and loc.get("line_start"):
            parts.append(_span("line", loc["line_start"], loc.get("line_end")))
        elif not self.page and loc.get("paragraph_start"):
            parts.append(_span("paragraph", loc["paragraph_start"], loc.get("paragraph_end")))
        if loc.get("anchor"):
            anchor = str(loc["anchor"])
            parts.append(anchor if "#" in anchor else f"#{anchor}")
        return " · ".join(parts)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Citation:
        return cls(document_id=str(d.get("document_id", "")), filename=d.get("filename") or "",
                   heading_path=list(d.get("heading_path") or []), locator=dict(d.get("locator") or {}),
                   source_path=d.get("source_path") or None)


@dataclass(frozen=True)
class SearchHit:
    chunk_id: str
    document_id: str
    filename: str
    content: str
    score: float
    heading_path: list[str]
    locator: dict[str, Any]
    highlights: list[list[int]] = field(default_factory=list)
    assets: list[dict[str, Any]] = field(default_factory=list)
    source_path: str | None = None  # its document's path in the folder it was uploaded from
    dense_score: float | None = None  # the embedding similarity alone, whatever the mode
    metadata: dict[str, Any] = field(default_factory=dict)  # its document's own fields
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def citation(self) -> Citation:
        return Citation.from_json(self.raw or {"document_id": self.document_id, "filename": self.filename,
                                               "heading_path": self.heading_path, "locator": self.locator,
                                               "source_path": self.source_path})

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SearchHit:
        return cls(chunk_id=str(d["chunk_id"]), document_id=str(d["document_id"]), filename=d.get("filename") or "",
                   content=d.get("content") or "", score=float(d.get("score") or 0.0),
                   heading_path=list(d.get("heading_path") or []), locator=dict(d.get("locator") or {}),
                   highlights=list(d.get("highlights") or []), assets=list(d.get("assets") or []),
                   source_path=d.get("source_path") or None,
                   dense_score=float(d["dense_score"]) if d.get("dense_score") is not None else None,
                   metadata=d.get("metadata") or {}, raw=d)


class SearchResults(list[SearchHit]):
    """The hits of a search, best first (a list), and ``unmatched_identifiers``: the identifiers the
    query names (codes, ticket, part, clause or version numbers) that no chunk the search could
    return holds, as the query wrote them."""

    def __init__(self, hits: list[SearchHit], unmatched_identifiers: list[str] | None = None,
                 raw: dict[str, Any] | None = None) -> None:
        super().__init__(hits)
        self.unmatched_identifiers: list[str] = list(unmatched_identifiers or [])
        self.raw: dict[str, Any] = raw or {}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SearchResults:
        return cls([SearchHit.from_json(r) for r in d.get("results") or []],
                   [str(i) for i in d.get("unmatched_identifiers") or []], d)


@dataclass(frozen=True)
class Chunk:
    id: str
    ordinal: int
    content: str
    heading_path: list[str]
    locator: dict[str, Any]
    token_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    document_metadata: dict[str, Any] = field(default_factory=dict)  # its document's own fields

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Chunk:
        return cls(id=str(d["id"]), ordinal=int(d["ordinal"]), content=d.get("content") or "",
                   heading_path=list(d.get("heading_path") or []), locator=dict(d.get("locator") or {}),
                   token_count=int(d.get("token_count") or 0), metadata=d.get("metadata") or {},
                   document_metadata=d.get("document_metadata") or {})


@dataclass(frozen=True)
class AnswerCitation:
    n: int
    chunk_id: str
    citation: Citation
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)  # its document's own fields

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AnswerCitation:
        return cls(n=int(d.get("n") or 0), chunk_id=str(d.get("chunk_id", "")), citation=Citation.from_json(d),
                   content=d.get("content") or "", metadata=d.get("metadata") or {})


@dataclass(frozen=True)
class Answer:
    """A grounded answer. ``answer`` is None when there is none (no model configured, nothing
    relevant retrieved); ``reason`` then says why and ``citations`` still hold the passages.
    ``grounded`` is False when the answer cites none of them (it does not rest on the documents)."""

    answer: str | None
    citations: list[AnswerCitation]
    query: str = ""
    reason: str | None = None
    unmatched_identifiers: list[str] = field(default_factory=list)  # named by the question, held by no chunk
    grounded: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Answer:
        return cls(answer=d.get("answer"), citations=[AnswerCitation.from_json(c) for c in d.get("citations") or []],
                   query=d.get("query") or "", reason=d.get("reason"),
                   unmatched_identifiers=[str(i) for i in d.get("unmatched_identifiers") or []],
                   # a server older than the field: an answer with a citation number in use is grounded
                   grounded=bool(d["grounded"]) if "grounded" in d else bool(d.get("answer") and d.get("cited")),
                   raw=d)


@dataclass(frozen=True)
class ReindexResult:
    queued: int
    skipped_active: int


@dataclass(frozen=True)
class EmbeddingMigration:
    """A knowledge base's move to another embedding model: ``status`` RUNNING, SWITCHED, ABORTED
    or FAILED; ``progress`` total / done / skipped / failed / pending / chunks / chunks_from_cache."""

    id: int
    status: str
    target: dict[str, Any]
    progress: dict[str, int]
    failures: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> EmbeddingMigration | None:
        if not d:
            return None
        return cls(id=int(d["id"]), status=d["status"], target=d.get("target") or {},
                   progress=d.get("progress") or {}, failures=d.get("failures") or [], raw=d)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list; pass ``next_cursor`` back for the next one (None: this was the last)."""

    items: list[T]
    next_cursor: str | None
    counts: dict[str, int] = field(default_factory=dict)


def _span(unit: str, start: int, end: int | None) -> str:
    """``line 4``, or ``lines 1-5`` when the passage spans several."""
    return f"{unit}s {start}-{end}" if end and end != start else f"{unit} {start}"
