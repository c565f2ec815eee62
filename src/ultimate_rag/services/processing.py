"""The ingestion pipeline (SPEC §5, seed 002 §5): parse -> chunk (+assets, snapshot) -> embed ->
index -> READY. Status before action: each stage is committed before its work starts. Every write
goes through the pipeline store's fenced methods (``ports.PipelineStore``), so a worker that lost
its lease commits nothing; the READY commit gets its contents as data (``ReadyCommit``) and its
steps outside the database from ``ready_commit.py``, where all nine are listed in order."""

from __future__ import annotations

import logging
import mimetypes
from collections.abc import Awaitable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar
from uuid import UUID

from ..domain.dedup import Decision
from ..domain.embedding_models import IndexPlan
from ..domain.errors import InvalidDocumentError, ResourceNotFoundError, TransientError, UltimateRagError
from ..domain.ids import asset_id, asset_object_key
from ..domain.lexical import KoreanMorphemes, chunks_terms, korean_of
from ..domain.metadata import parsed_fields
from ..domain.models import (
    SNAPSHOT_FORMAT_VERSION,
    Chunk,
    DocumentAsset,
    DocumentSource,
    EmbeddedChunk,
    Lease,
    ParsedAsset,
    ParsedDocument,
    PipelineDocument,
    ReadyCommit,
    StageEntry,
    figure_text,
)
from ..domain.ports import (
    CentroidStore,
    Chunker,
    ChunkSnapshotStore,
    Embedder,
    ImageDescriber,
    IndexRouter,
    MigrationItemQueue,
    ObjectStorage,
    ParseExecutor,
    Parser,
    ParserResolver,
    PipelineStore,
    Truncating,
)
from ..domain.status import DocumentStatus as S
from ..offload import IN_A_THREAD, run_sized
from .dedup import Deduplicator
from .embedding.models import EmbeddingModels
from .embedding.passages import EmbeddingService
from .parse_lane import LongParseLane
from .progress import EmbeddingProgress, parse_progress
from .ready_commit import Publication, ReadyCommitSteps, VectorWrites

log = logging.getLogger(__name__)
T = TypeVar("T")


async def _deterministic(work: Awaitable[T], what: str) -> T:
    """Parsing and chunking depend only on the bytes: an unexpected error there will happen again
    on every retry, so it fails the document at once with a readable reason."""
    try:
        return await work
    except UltimateRagError:
        raise
    except MemoryError as exc:
        raise InvalidDocumentError(f"could not {what}: it needs too much memory") from exc
    except Exception as exc:
        raise InvalidDocumentError(f"could not {what}: {exc.__class__.__name__}: {exc}"[:500]) from exc


class DocumentProcessor:
    def __init__(self, *, store: PipelineStore, storage: ObjectStorage, parsers: ParserResolver, chunker: Chunker,
                 models: EmbeddingModels, indexes: IndexRouter, snapshots: ChunkSnapshotStore,
                 parse_runner: ParseExecutor, default_chunk_size: int, default_overlap: int,
                 progress_interval: float = 1.0, vision: ImageDescriber | None = None,
                 dedup: Deduplicator | None = None, centroids: CentroidStore | None = None,
                 migration_items: MigrationItemQueue | None = None, lane: LongParseLane | None = None,
                 korean: KoreanMorphemes | None = None) -> None:
        """``models``: each knowledge base's embedding model; ``indexes``: the one vector store
        (writes per index generation); ``vision``: an image describer, or None (alt text and
        captions describe images); ``migration_items``: where a document the migration's new model
        failed on goes back to (the migration's own item retries it); ``lane``: where a long parse
        stops counting against the worker's concurrency (parse_lane.py; None: no lane); ``korean``:
        the Korean analyzer of BM25's terms, for knowledge bases whose ``korean_terms`` asks for it."""
        self._korean = korean
        self._store = store
        self._storage = storage
        self._parsers = parsers
        self._chunker = chunker
        self._models = models
        self._indexes = indexes
        self._snapshots = snapshots
        self._parse_runner = parse_runner
        self._chunk_size = default_chunk_size
        self._overlap = default_overlap
        self._progress_interval = progress_interval
        self._vision = vision
        self._dedup = dedup
        self._migration_items = migration_items
        self.lane = lane or LongParseLane(0, 0)
        self._ready = ReadyCommitSteps(indexes=indexes, snapshots=snapshots, storage=storage, centroids=centroids)

    async def process(self, lease: Lease) -> dict[str, str] | None:
        """Run the pipeline for the leased document; returns the stage timestamps of the run that
        made it READY (None when it was READY already, or ended OUTDATED as an older duplicate)."""
        doc = lease.document or await self._store.load_document(lease.document_id)  # read by the claim
        if doc is None:
            raise ResourceNotFoundError("the document no longer exists")
        if doc.status == S.READY:  # idempotent: nothing to do, the job just completes
            await self._store.complete_already_ready(lease)
            return None
        plan = self._indexes.plan_from(doc.knowledge_base_id, doc.index_state)
        embedding = self._models.embedding(plan.current.spec)
        parser, parsed = await self._parse(lease, doc)
        chunks, assets = await self._chunk(lease, doc, parser, parsed, embedding.embedder)
        entered = {"stage": "EMBEDDING", "done": 0, "total": len(chunks), "from_cache": 0}
        decision = await self._judge(lease, doc, parsed, entered)
        if decision.outdated_self:
            return None  # the older of two duplicates: OUTDATED, nothing embedded
        writes, from_cache = await self._embed(lease, doc, plan, embedding, chunks, entered)
        await self._store.enter_stage(lease, S.INDEXING, {"stage": "INDEXING", "done": 0, "total": len(chunks),
                                                          "from_cache": from_cache})
        publication = Publication(doc, plan, writes, embedding.embedder.name)
        commit = ReadyCommit(chunks=tuple(chunks), revision=doc.content_revision, outdate=decision.outdate,
                             assets=tuple(a.id for a in assets), properties=parsed_fields(parsed.metadata))
        outcome = await self._store.commit_ready(lease, commit, write_vectors=partial(self._ready.write_vectors,
                                                                                      publication),
                                                 finish=partial(self._ready.finish, publication))
        await self._ready.after_swap(publication, outcome,
                                     superseded=outcome.previous_revision is not None or lease.attempt > 1)
        return outcome.stage_timings

    async def _parse(self, lease: Lease, doc: PipelineDocument) -> tuple[Parser, ParsedDocument]:
        """The source and the parser for it, then PARSING (with that parser) in one write, the
        parse, the optional image descriptions and the parser's warnings."""
        try:
            content = await self._storage.get(doc.object_key)
        except UltimateRagError:  # the storage adapter already said permanent or transient
            raise
        except Exception as exc:
            raise TransientError(f"could not read the source file from storage: {exc}",
                                 service="object storage") from exc
        source = DocumentSource(doc.id, doc.filename, doc.mime_type, content)
        parser = self._parsers.resolve(source)
        await self._store.start_parsing(lease, parser.name, parser.version)
        pages = parse_progress(self._store, lease, self._progress_interval)
        async with self.lane.parsing():  # a long one (a scanned book) lets the worker take other work
            parsed = await _deterministic(self._parse_runner.parse(parser, source, pages), "parse the file")
        parsed = await self._describe_images(parsed)
        warnings = [str(w) for w in parsed.metadata.get("warnings") or ()]
        if warnings:
            await self._store.record_warnings(lease, warnings)
        return parser, parsed

    async def _chunk(self, lease: Lease, doc: PipelineDocument, parser: Parser, parsed: ParsedDocument,
                     embedder: Embedder) -> tuple[list[Chunk], list[DocumentAsset]]:
        """CHUNKING: the chunks (none: the document is invalid, before anything is embedded), the
        assets stored with their rows, and the revision's chunk snapshot."""
        await self._store.enter_stage(lease, S.CHUNKING)
        settings = doc.kb_settings
        chunks = await _deterministic(run_sized(
            sum(len(block.text) for block in parsed.blocks), self._chunker.split, parsed, document_id=doc.id,
            knowledge_base_id=doc.knowledge_base_id, revision=doc.content_revision,
            chunk_size=settings.chunk_size_tokens or self._chunk_size,
            overlap=settings.chunk_overlap_tokens if settings.chunk_size_tokens else self._overlap,
        ), "split the file into chunks")
        if not chunks:
            raise InvalidDocumentError("the document contains no text to index")
        stored = await self._persist_assets(lease, doc, parsed)
        chunks = [replace(c, metadata=_with_assets(c.metadata, stored, doc.id) | {
            "filename": doc.filename, "source_locator": c.locator.to_metadata()}) for c in chunks]
        chunks = _note_truncation(chunks, embedder)
        await self._write_snapshot(doc, parser, parsed, chunks)
        return chunks, list(stored.values())

    async def _judge(self, lease: Lease, doc: PipelineDocument, parsed: ParsedDocument,
                     entered: dict[str, Any]) -> Decision:
        """Deduplication's verdict, then EMBEDDING: a unique document enters it with the verdict's
        own write (``Decision.entered``), any other with a write of its own here."""
        decision = await self._dedup.judge(lease, doc, parsed, StageEntry(S.EMBEDDING, entered)) \
            if self._dedup else Decision()
        if not decision.outdated_self and not decision.entered:
            await self._store.enter_stage(lease, S.EMBEDDING, entered)
        return decision

    async def _embed(self, lease: Lease, doc: PipelineDocument, plan: IndexPlan, embedding: EmbeddingService,
                     chunks: list[Chunk], entered: dict[str, Any]) -> tuple[VectorWrites, int]:
        """EMBEDDING: the dense and sparse vectors for the plan's current generation, and, while an
        embedding-model migration runs, the dense ones of its target (``_embed_for_target``).
        Returns each generation's vectors, the current one first, and how many came from the cache."""
        texts = [c.embedding_text for c in chunks]
        kb_id = doc.knowledge_base_id
        korean = korean_of(doc.kb_settings.korean_terms, self._korean)
        report = EmbeddingProgress(self._store, lease, self._progress_interval, final=False,  # INDEXING follows
                                   shown=entered)
        vectors, sparse = await embedding.embed_with_sparse(texts, report, knowledge_base_id=kb_id)
        lexical = await run_sized(IN_A_THREAD if korean else 0, chunks_terms, kb_id, texts, korean)
        current = [EmbeddedChunk(chunk=c, embedding=tuple(v), sparse=sparse[i] if sparse is not None else None,
                                 lexical=lexical[i])
                   for i, (c, v) in enumerate(zip(chunks, vectors, strict=True))]
        return [(plan.current, current), *await self._embed_for_target(plan, chunks, texts, doc.id)], report.from_cache

    async def _embed_for_target(self, plan: IndexPlan, chunks: list[Chunk], texts: list[str],
                                document_id: UUID) -> VectorWrites:
        """While an embedding-model migration runs, new content is embedded for both generations.
        The new model failing does not fail the document: the migration gets an item for it, which
        retries on its own attempts (and, if it fails for good, stops the switch)."""
        if plan.target is None:
            return []
        try:
            vectors = await self._models.embedding(plan.target.spec).embed_passages(
                texts, knowledge_base_id=plan.knowledge_base_id)
        except Exception as exc:
            log.warning("document %s: the migration's new model failed (%s); its item will retry", document_id, exc)
            if self._migration_items is not None and plan.migration_id is not None:
                await self._migration_items.requeue(plan.migration_id, document_id)
            return []
        items = [EmbeddedChunk(chunk=c, embedding=tuple(v)) for c, v in zip(chunks, vectors, strict=True)]
        return [(plan.target, items)]

    async def cleanup_partial_index(self, lease: Lease) -> None:
        """A failed attempt: the vectors it wrote go; the published revision's stay and serve."""
        keep = await self._store.published_chunk_ids(lease.document_id)
        await self._indexes.delete_document_except(lease.document_id, keep)

    async def _describe_images(self, parsed: ParsedDocument) -> ParsedDocument:
        """The optional vision step: each image's description comes from the vision model and
        replaces the alt text / caption in the asset and in the text of the block that shows it.
        A failed call raises TransientError (the job retries); without a model nothing changes."""
        if self._vision is None or not parsed.assets:
            return parsed
        described: dict[str, ParsedAsset] = {}
        for asset in parsed.assets:
            if not asset.mime_type.startswith("image/"):
                continue
            text = await self._vision.describe(asset.data, asset.mime_type, asset.description)
            described[asset.locator_key] = replace(asset, description=text)
        blocks = tuple(
            replace(b, text=figure_text(described[b.asset_ids[0]]))
            if b.kind == "figure" and len(b.asset_ids) == 1 and b.asset_ids[0] in described else b
            for b in parsed.blocks)
        assets = tuple(described.get(a.locator_key, a) for a in parsed.assets)
        return replace(parsed, blocks=blocks, assets=assets,
                       metadata={**parsed.metadata, "image_descriptions": "vision"})

    async def _persist_assets(self, lease: Lease, doc: PipelineDocument,
                              parsed: ParsedDocument) -> dict[str, DocumentAsset]:
        """Assets get stable keys; they are stored before their rows, and the rows before READY (so
        an interrupted run's objects are known). Without assets nothing is written here: the READY
        commit removes every asset row but the revision's own."""
        if not parsed.assets:
            return {}
        kb_id, doc_id = doc.knowledge_base_id, doc.id
        assets: list[DocumentAsset] = []
        for parsed_asset in parsed.assets:
            ident = asset_id(doc_id, parsed_asset.locator_key, doc.content_revision)
            ext = mimetypes.guess_extension(parsed_asset.mime_type) or ""
            key = asset_object_key(kb_id, doc_id, ident, ext)
            await self._storage.put(key, parsed_asset.data, parsed_asset.mime_type)
            assets.append(DocumentAsset(
                id=ident, document_id=doc_id, knowledge_base_id=kb_id, object_key=key,
                mime_type=parsed_asset.mime_type, size_bytes=len(parsed_asset.data), page=parsed_asset.page,
                description=parsed_asset.description, locator_key=parsed_asset.locator_key,
            ))
        for stale_key in await self._store.replace_assets(lease, assets, doc.content_revision):
            await self._storage.delete(stale_key)
        return {a.locator_key: a for a in assets}

    async def _write_snapshot(self, doc: PipelineDocument, parser: Parser, parsed: ParsedDocument,
                              chunks: list[Chunk]) -> None:
        snapshot = {
            "format_version": SNAPSHOT_FORMAT_VERSION,
            "stage": S.CHUNKING.value,
            "written_at": datetime.now(UTC).isoformat(),
            "document": {"id": str(doc.id), "knowledge_base_id": str(doc.knowledge_base_id),
                         "filename": doc.filename, "sha256": doc.sha256,
                         "content_revision": doc.content_revision},
            "parser": {"name": parser.name, "version": parser.version},
            "metadata": parsed.metadata,
            "chunks": [{"id": str(c.id), "ordinal": c.ordinal, "content": c.content,
                        "token_count": c.token_count, "heading_path": list(c.heading_path),
                        "context": c.context, "locator": c.locator.to_metadata(), "metadata": c.metadata}
                       for c in chunks],
        }
        try:
            await self._snapshots.save(knowledge_base_id=doc.knowledge_base_id, document_id=doc.id,
                                       snapshot=snapshot, revision=doc.content_revision)
        except OSError as exc:
            raise TransientError(f"could not write the chunk snapshot: {exc.strerror or exc}") from exc


def _with_assets(metadata: dict[str, Any], stored: dict[str, DocumentAsset], document_id: UUID) -> dict[str, Any]:
    """Swap the chunker's asset locator keys for what a search result links: id, URL, page, type."""
    meta = dict(metadata)
    keys = meta.pop("asset_keys", ())
    links = [{"id": str(a.id), "url": f"/api/documents/{document_id}/assets/{a.id}", "mime_type": a.mime_type,
              "page": a.page, "description": a.description}
             for a in (stored.get(k) for k in keys) if a is not None]
    if links:
        meta["assets"] = links
    return meta


def _note_truncation(chunks: list[Chunk], embedder: Embedder) -> list[Chunk]:
    """An embedder that truncates inputs over its token limit (the HTTP one: providers reject
    them) embeds only the start of a longer chunk: say so in that chunk's metadata."""
    if not isinstance(embedder, Truncating) or not embedder.max_tokens:
        return chunks
    limit = embedder.max_tokens
    return [replace(c, metadata={**c.metadata, "embedding_truncated": {"tokens": c.token_count, "max_tokens": limit}})
            if c.token_count > limit else c for c in chunks]
