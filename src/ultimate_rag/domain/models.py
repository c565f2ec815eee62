"""Domain entities and value objects (SPEC §3). Plain dataclasses, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from .lexical import BIGRAMS, MORPHEMES, ChunkTerms
from .status import DocumentStatus, JobOperation, JobStatus
from .work_end import WorkEnd


@dataclass(frozen=True, slots=True)
class KnowledgeBaseSettings:
    chunk_size_tokens: int = 256
    chunk_overlap_tokens: int = 32
    dedup_mode: str = "exact"
    near_duplicate_threshold: float = 0.9
    embedding_model: str | None = None
    embedding_dimension: int | None = None
    embedder: str | None = None  # "local" | "openai"; None on knowledge bases made before it was recorded
    index_generation: int = 0  # the vector index generation search reads (0: the shared index of the model)
    # BM25's Korean terms (domain/lexical.py), fixed for the knowledge base's life: a Korean
    # analyzer's morphemes; knowledge bases made before it was recorded keep character bigrams
    korean_terms: str = MORPHEMES

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> KnowledgeBaseSettings:
        data = data or {}
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known.setdefault("korean_terms", BIGRAMS)  # made before it was recorded (lexical_pg.sql agrees)
        return cls(**known)


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    id: UUID
    name: str
    description: str
    settings: KnowledgeBaseSettings
    created_at: datetime
    deleting: bool = False


@dataclass(frozen=True)
class DocumentFile:
    """A document's file as it was uploaded, and where it belongs: the fields ``Document`` and the
    API's ``DocumentOut`` share, declared once. No storage of its own (empty ``__slots__``): each
    class that extends it keeps its own."""

    __slots__ = ()
    id: UUID
    knowledge_base_id: UUID
    filename: str
    mime_type: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Document(DocumentFile):
    object_key: str
    status: DocumentStatus
    error_message: str | None
    progress: dict[str, Any]
    parser_name: str | None
    parser_version: str | None
    chunk_count: int
    content_revision: int
    source: dict[str, Any]
    duplicate_of: UUID | None
    stage_timings: dict[str, str]
    created_at: datetime
    updated_at: datetime
    indexed_at: datetime | None = None
    deleted_at: datetime | None = None
    attempts: int = 0
    max_attempts: int = 0
    job_status: JobStatus | None = None
    job_operation: JobOperation | None = None  # what its job does: a PENDING document may be queued for deletion
    dedup: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # what parsing left out or changed (ParsedDocument.metadata["warnings"])
    published_revision: int | None = None  # the revision search serves (SPEC §4 rule 3); None: not searchable
    metadata: dict[str, Any] = field(default_factory=dict)  # its own fields (domain/metadata.py)

    @property
    def searchable(self) -> bool:
        return self.published_revision is not None


@dataclass(frozen=True, slots=True)
class PipelineDocument:
    """A document as a job reads it when it starts (processing, deduplication, deletion), with its
    knowledge base's settings: the pipeline's one view of the row, read under no lock."""

    id: UUID
    knowledge_base_id: UUID
    filename: str
    mime_type: str
    object_key: str
    sha256: str
    status: DocumentStatus
    content_revision: int
    created_at: datetime
    source: dict[str, Any] = field(default_factory=dict)
    dedup_exempt: tuple[UUID, ...] = ()  # documents deduplication never compares it with
    kb_settings: KnowledgeBaseSettings = field(default_factory=KnowledgeBaseSettings)
    kb_deleting: bool = False  # its knowledge base is being deleted
    migration_target: dict[str, Any] | None = None  # its knowledge base's running migration's target generation
    migration_id: int | None = None

    @property
    def index_state(self) -> IndexState:
        """Its knowledge base's index state as read with it (the plan, without a read of its own)."""
        return IndexState(self.kb_settings, self.migration_target, self.migration_id)


@dataclass(frozen=True, slots=True)
class OlderTwin:
    """The older of two duplicates, made OUTDATED by the newer one's READY commit: ``verdict`` is
    what its document records (role "older", compared with the newer)."""

    document_id: UUID
    knowledge_base_id: UUID  # whose deduplication lock the commit takes first
    verdict: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StageEntry:
    """A stage the document enters (status before action: committed before the stage's work),
    with its first progress; handed to a write that can carry it (deduplication's verdict)."""

    status: DocumentStatus
    progress: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Lease:
    """What a worker proves on every write it makes for a job (fencing, SPEC §4)."""

    job_id: UUID
    document_id: UUID
    worker_id: str
    attempt: int
    max_attempts: int
    operation: JobOperation = JobOperation.INGEST
    force: bool = False
    suspect: bool = False  # its last attempt ended in a lost lease: it runs alone in its worker
    # the document as the claim read it (read under no lock, like load_document); None: not read
    document: PipelineDocument | None = field(default=None, compare=False, repr=False)
    end: WorkEnd = field(default_factory=WorkEnd, compare=False, repr=False)  # the work's own end (see WorkEnd)


@dataclass(frozen=True, slots=True)
class SourceLocator:
    """Where a chunk comes from in its source: page (paged formats) — ``page`` when it lies on one
    page, ``page_start``/``page_end`` when it spans several —, lines and characters, and for
    tabular formats the data rows (1-based, the header row not counted). A table inside a
    document (DOCX, HTML, Markdown, PPTX, ODF, PDF) is cited by ``table`` (its number in the
    document, 1-based) and the rows as the table counts them (header rows included). Formats
    without pages (DOCX, HTML, EPUB, ODT) cite ``paragraph_start``/``paragraph_end`` (DOCX: the
    body's ``w:p`` elements in document order; HTML: the page's blocks as parsed, 1-based) and an
    ``anchor`` where the source has one (an HTML ``id``, a DOCX heading bookmark)."""

    page: int | None = None
    page_start: int | None = None
    page_end: int | None = None
    line_start: int | None = None
    line_end: int | None = None
    char_start: int | None = None
    char_end: int | None = None
    row_start: int | None = None
    row_end: int | None = None
    # text read by OCR: its box on the page (x0, y0, x1, y1), in PDF points for PDF pages and in
    # pixels for uploaded images, origin at the top left
    bbox: tuple[int, int, int, int] | None = None
    table: int | None = None
    paragraph_start: int | None = None
    paragraph_end: int | None = None
    anchor: str | None = None

    def to_metadata(self) -> dict[str, Any]:
        data: dict[str, Any] = {k: v for k in _LOCATOR_FIELDS if (v := getattr(self, k)) is not None}
        if self.bbox is not None:
            data["bbox"] = list(self.bbox)
        return data

    @classmethod
    def from_metadata(cls, data: dict[str, Any] | None) -> SourceLocator:
        data = data or {}
        box = data.get("bbox")
        bbox = None
        if isinstance(box, list | tuple) and len(box) == 4:
            x0, y0, x1, y1 = (int(v) for v in box)
            bbox = (x0, y0, x1, y1)
        return cls(**{k: data.get(k) for k in _LOCATOR_FIELDS}, bbox=bbox)


_LOCATOR_FIELDS = ("page", "page_start", "page_end", "line_start", "line_end", "char_start", "char_end",
                   "row_start", "row_end", "table", "paragraph_start", "paragraph_end", "anchor")


@dataclass(frozen=True, slots=True)
class Block:
    """One structural unit of a parsed document.

    kind: "heading" | "paragraph" | "code" | "table" | "list" | "quote"; ``level`` is the heading
    level (1..6) for headings. Code blocks and tables are kept whole by the chunker when they fit.
    ``rows`` (tables): the locator of each data row, in the order of the table's lines after its
    header, so a chunk holding some rows cites exactly those. ``caption`` (tables): the table's
    caption or title, which the chunker repeats above the header in every chunk of the table.
    """

    kind: str
    text: str
    locator: SourceLocator = field(default_factory=SourceLocator)
    level: int = 0
    asset_ids: tuple[str, ...] = ()
    rows: tuple[SourceLocator, ...] = ()
    caption: str = ""

    @property
    def shown(self) -> str:
        """What a reader sees of the block: its caption (a table's), then its text."""
        return f"{self.caption}\n\n{self.text}" if self.caption else self.text


@dataclass(frozen=True, slots=True)
class ParsedAsset:
    """An image (or other binary) found inside a document, with a locator that makes its id stable."""

    locator_key: str
    data: bytes
    mime_type: str
    page: int | None = None
    description: str = ""


def figure_text(asset: ParsedAsset) -> str:
    """What a chunk says where an image sits: its description (vision, alt text or caption)."""
    page = f" on page {asset.page}" if asset.page else ""
    return f"[Image{page}: {asset.description}]" if asset.description else f"[Image{page}]"


# the chunk snapshot's format (chunks.json beside the chunks, SPEC §5), written by the pipeline
SNAPSHOT_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    blocks: tuple[Block, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    assets: tuple[ParsedAsset, ...] = ()

    @property
    def text(self) -> str:
        return "\n\n".join(b.shown for b in self.blocks)


@dataclass(frozen=True, slots=True)
class DocumentSource:
    """What a parser gets: the bytes and what we know about them."""

    document_id: UUID | None
    filename: str
    mime_type: str
    content: bytes

    @property
    def extension(self) -> str:
        name = self.filename.lower()
        return name[name.rfind("."):] if "." in name else ""


@dataclass(frozen=True, slots=True)
class Chunk:
    id: UUID
    document_id: UUID
    knowledge_base_id: UUID
    ordinal: int
    content: str
    token_count: int
    heading_path: tuple[str, ...]
    locator: SourceLocator
    metadata: dict[str, Any] = field(default_factory=dict)
    context: str = ""  # heading context embedded before the content (empty: content says it already)
    identifiers: tuple[str, ...] | None = None  # its identifier keys (domain/identifiers.py); None: not computed

    @property
    def embedding_text(self) -> str:
        """What the embedder sees: the heading context, then the content. ``token_count`` counts it."""
        return f"{self.context}\n\n{self.content}" if self.context else self.content


@dataclass(frozen=True, slots=True)
class EmbeddedChunk:
    chunk: Chunk
    embedding: tuple[float, ...]
    sparse: dict[int, float] | None = None  # learned sparse vector (index -> weight), L2-normalised
    lexical: ChunkTerms | None = None  # BM25 weights of its terms (domain/lexical.py)


@dataclass(frozen=True, slots=True)
class ReadyCommit:
    """What the READY commit writes as data: the new revision's chunks and, when deduplication
    judged this document the newer of two, the older twin it outdates in the same transaction."""

    chunks: tuple[Chunk, ...]
    revision: int
    outdate: OlderTwin | None = None
    assets: tuple[UUID, ...] = ()  # the revision's asset rows (written before): every other one goes
    properties: dict[str, Any] = field(default_factory=dict)  # metadata's parsed keys (metadata.PARSED)


@dataclass(frozen=True, slots=True)
class IndexState:
    """A knowledge base's settings and the target generation and id of its running embedding-model
    migration, as the READY commit reads them: where its vectors must be when the document is READY."""

    settings: KnowledgeBaseSettings
    migration_target: dict[str, Any] | None = None
    migration_id: int | None = None


@dataclass(frozen=True, slots=True)
class ReadyOutcome:
    """What the READY commit leaves the caller: the object keys of the asset rows it removed (their
    objects go after the commit), the stage timestamps of the run it ended (for the metrics), the
    revision search served before it (None: none, the document's first publication) and the
    knowledge base's index state as the commit read it (None: not read)."""

    stale_assets: tuple[str, ...] = ()
    stage_timings: dict[str, str] = field(default_factory=dict)
    previous_revision: int | None = None
    index_state: IndexState | None = None


@dataclass(frozen=True, slots=True)
class DocumentAsset:
    id: UUID
    document_id: UUID
    knowledge_base_id: UUID
    object_key: str
    mime_type: str
    size_bytes: int
    page: int | None
    description: str
    locator_key: str


@dataclass(frozen=True, slots=True)
class VectorHit:
    chunk_id: UUID
    score: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    chunk_id: UUID
    document_id: UUID
    filename: str
    content: str
    score: float
    heading_path: tuple[str, ...]
    locator: SourceLocator
    assets: tuple[dict[str, Any], ...] = ()
    highlights: tuple[tuple[int, int], ...] = ()
    # the chunk's dense cosine similarity alone (``score`` may be a fusion): a relevance scale that
    # does not depend on the search mode, used to decide whether anything relevant was found
    dense_score: float | None = None
    # the query's identifiers this chunk holds, as the query wrote them (the identifier stage
    # ranked it above the chunks holding fewer; an answer cites it whatever its score)
    identifiers: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)  # its document's (read with it, never copied)


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """A search's results, and the identifiers the query names that no chunk it could return holds
    (as the query wrote them; SPEC §10 ``unmatched_identifiers``): the ranking is then the usual one."""

    results: list[SearchResult]
    unmatched_identifiers: tuple[str, ...] = ()
