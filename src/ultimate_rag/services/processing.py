"""The ingestion pipeline (SPEC §5, seed 002 §5): parse -> chunk (+assets, snapshot) -> embed ->
index -> READY. Status before action: each stage is committed before its work starts. Every write
goes through the queue's fenced methods, so a worker that lost its lease commits nothing."""

from __future__ import annotations

import asyncio
import logging
import mimetypes
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..adapters.parsers.isolation import ParseRunner
from ..adapters.parsers.pdf import figure_text
from ..adapters.postgres.queue import JobQueue
from ..adapters.snapshots.filesystem import SNAPSHOT_FORMAT_VERSION
from ..adapters.vectors.generations import Generation, IndexGenerations, IndexPlan
from ..domain.errors import (
    InvalidDocumentError,
    ResourceNotFoundError,
    TransientError,
    UltimateRagError,
)
from ..domain.ids import asset_id, asset_object_key
from ..domain.models import (
    Chunk,
    DocumentAsset,
    DocumentSource,
    EmbeddedChunk,
    KnowledgeBaseSettings,
    Lease,
    ParsedAsset,
    ParsedDocument,
)
from ..domain.ports import Chunker, ChunkSnapshotStore, ObjectStorage, ParserResolver, VectorStore
from ..domain.status import DocumentStatus as S
from .embedding import EmbeddingService, ProgressCallback

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
    def __init__(self, *, queue: JobQueue, storage: ObjectStorage, parsers: ParserResolver, chunker: Chunker,
                 embedding: EmbeddingService, vectors: VectorStore, snapshots: ChunkSnapshotStore,
                 default_chunk_size: int, default_overlap: int, progress_interval: float = 1.0,
                 parse_runner: ParseRunner | None = None, vision: Any = None, dedup: Any = None,
                 centroids: Any = None, models: Any = None) -> None:
        self._queue = queue
        self._models = models  # EmbeddingModels: each knowledge base's own embedder (services/embedding_models.py)
        self._centroids = centroids  # LanguageCentroids: per-language means for search's language centring
        self._storage = storage
        self._parsers = parsers
        self._chunker = chunker
        self._embedding = embedding
        self._vectors = vectors
        self._generations = vectors if isinstance(vectors, IndexGenerations) else None
        self._snapshots = snapshots
        self._chunk_size = default_chunk_size
        self._overlap = default_overlap
        self._progress_interval = progress_interval
        self._parse_runner = parse_runner or ParseRunner(isolate=False)
        self._vision = vision  # an image describer (adapters/vision) or None
        self._dedup = dedup  # a Deduplicator (services/dedup.py) or None

    async def process(self, lease: Lease) -> None:
        row = await self._queue.load_document_row(lease.document_id)
        if row is None:
            raise ResourceNotFoundError("the document no longer exists")
        if row["status"] == S.READY:  # idempotent: nothing to do, the job just completes
            await self._queue.complete_already_ready(lease)
            return

        kb_settings = KnowledgeBaseSettings.from_dict(row["kb_settings"])
        gens = self._generations
        plan = await gens.plan(row["knowledge_base_id"]) if gens is not None else None
        embedding = self._models.embedding(plan.current.spec) if plan and self._models else self._embedding
        await self._queue.enter_stage(lease, S.PARSING)
        try:
            content = await self._storage.get(row["object_key"])
        except UltimateRagError:  # the storage adapter already said permanent or transient
            raise
        except Exception as exc:
            raise TransientError(f"could not read the source file from storage: {exc}",
                                 service="object storage") from exc
        source = DocumentSource(row["id"], row["filename"], row["mime_type"], content)
        parser = self._parsers.resolve(source)
        await self._queue.record_parser(lease, parser.name, parser.version)
        parsed: ParsedDocument = await _deterministic(
            self._parse_runner.parse(parser, source, self._parse_progress(lease)), "parse the file")
        parsed = await self._describe_images(parsed)
        warnings = [str(w) for w in parsed.metadata.get("warnings") or ()]
        if warnings:
            await self._queue.record_warnings(lease, warnings)

        await self._queue.enter_stage(lease, S.CHUNKING)
        chunks = await _deterministic(asyncio.to_thread(
            self._chunker.split, parsed, document_id=row["id"], knowledge_base_id=row["knowledge_base_id"],
            revision=row["content_revision"], chunk_size=kb_settings.chunk_size_tokens or self._chunk_size,
            overlap=kb_settings.chunk_overlap_tokens if kb_settings.chunk_size_tokens else self._overlap,
        ), "split the file into chunks")
        if not chunks:
            raise InvalidDocumentError("the document contains no text to index")
        stored = await self._persist_assets(lease, row, parsed)
        chunks = [replace(c, metadata=_with_assets(c.metadata, stored, row["id"]) | {
            "filename": row["filename"], "source_locator": c.locator.to_metadata()}) for c in chunks]
        chunks = _note_truncation(chunks, embedding.embedder)
        await self._write_snapshot(row, parser, parsed, chunks)
        decision = await self._dedup.judge(lease, row, parsed, kb_settings) if self._dedup else None
        if decision is not None and decision.outdated_self:
            return  # the older of two duplicates: OUTDATED, nothing embedded

        total = len(chunks)
        await self._queue.enter_stage(lease, S.EMBEDDING, {"stage": "EMBEDDING", "done": 0, "total": total})
        texts = [c.embedding_text for c in chunks]
        vectors = await embedding.embed_passages(texts, self._progress(lease),
                                                 knowledge_base_id=row["knowledge_base_id"])
        sparse = await embedding.sparse_passages(texts, knowledge_base_id=row["knowledge_base_id"])
        embedded = [EmbeddedChunk(chunk=c, embedding=tuple(v), sparse=sparse[i] if sparse is not None else None)
                    for i, (c, v) in enumerate(zip(chunks, vectors, strict=True))]
        also = await self._embed_for_target(plan, chunks, texts, row["knowledge_base_id"], lease.document_id)

        await self._queue.enter_stage(lease, S.INDEXING, {"stage": "INDEXING", "done": 0, "total": total})

        async def write_vectors() -> None:  # beside the published revision's: nothing is deleted before the swap
            if plan is None or gens is None:
                await self._vectors.upsert(row["knowledge_base_id"], embedded)
            else:
                await gens.write(row["knowledge_base_id"], [(plan.current, embedded), *also])
                await self._check_plan(plan, [plan.current, *(g for g, _ in also)])
            if self._centroids is not None:
                await self._centroids.add(row["knowledge_base_id"], embedding.embedder.name, embedded)

        hooks = self._dedup.completion_hooks(row["knowledge_base_id"], row["id"], decision) if decision else {}
        async def publish_snapshot() -> None:  # READY readers find chunks.json of the revision they see
            await self._snapshots.publish(row["knowledge_base_id"], row["id"], row["content_revision"])

        stale_assets = await self._queue.complete_ready(lease, chunks, write_vectors, revision=row["content_revision"],
                                                        before_commit=publish_snapshot, **hooks)
        await self._after_swap(row, [c.id for c in chunks], stale_assets)

    async def _after_swap(self, row: dict[str, Any], published: list[Any], stale_assets: list[str]) -> None:
        """The previous revision's vectors and asset objects go only now, after the swap committed;
        a failure (or a crash) here leaves garbage the janitor removes, never a gap. (Its snapshot
        was replaced by the new one's rename, the commit's last step.)"""
        try:
            await self._vectors.delete_document_except(row["id"], published)
            for key in stale_assets:
                await self._storage.delete(key)
        except Exception:
            log.exception("could not remove the previous revision of %s; the janitor will", row["id"])

    async def _embed_for_target(self, plan: IndexPlan | None, chunks: list[Chunk], texts: list[str],
                                kb_id: Any, document_id: Any) -> list[tuple[Generation, list[EmbeddedChunk]]]:
        """While an embedding-model migration runs, new content is embedded for both generations.
        The new model failing does not fail the document: the migration gets an item for it, which
        retries on its own attempts (and, if it fails for good, stops the switch)."""
        if plan is None or plan.target is None or self._models is None:
            return []
        try:
            vectors = await self._models.embedding(plan.target.spec).embed_passages(texts, knowledge_base_id=kb_id)
        except Exception as exc:
            log.warning("document %s: the migration's new model failed (%s); its item will retry", document_id, exc)
            migrations = self._models.migrations
            if migrations is not None and plan.migration_id is not None:
                await migrations.requeue(plan.migration_id, document_id)
            return []
        items = [EmbeddedChunk(chunk=c, embedding=tuple(v)) for c, v in zip(chunks, vectors, strict=True)]
        return [(plan.target, items)]

    async def _check_plan(self, plan: IndexPlan, written: list[Generation]) -> None:
        """The knowledge base switched generations to one this run did not write (a migration that
        began and ended while it ran): index again rather than serve a document from nowhere."""
        assert self._generations is not None  # a plan exists only with generations
        now = await self._generations.plan(plan.knowledge_base_id)
        if now.current not in written:
            raise TransientError("the knowledge base switched to another embedding model while this document was "
                                 "indexed; it is indexed again with the new model")

    async def cleanup_partial_index(self, lease: Lease) -> None:
        """A failed attempt: the vectors it wrote go; the published revision's stay and serve."""
        keep = await self._queue.published_chunk_ids(lease.document_id)
        await self._vectors.delete_document_except(lease.document_id, keep)

    def _progress(self, lease: Lease) -> ProgressCallback:
        last = 0.0

        first_wait = True

        async def report(done: int, total: int, from_cache: int, waiting: bool = False) -> None:
            """At most one write per ``progress_interval`` (the last one always), except that a
            first wait for the embedder, before any chunk was embedded, is shown at once."""
            nonlocal last, first_wait
            now = asyncio.get_running_loop().time()
            show_wait = waiting and first_wait and done == from_cache
            if not show_wait and done < total and now - last < self._progress_interval:
                return
            last, first_wait = now, first_wait and not waiting
            state = {"stage": "EMBEDDING", "done": done, "total": total, "from_cache": from_cache}
            await self._queue.report_progress(lease, state | ({"waiting": "embedder"} if waiting else {}))

        return report

    def _parse_progress(self, lease: Lease) -> Callable[[int, int], Awaitable[None]]:
        """Pages done / total while PARSING (OCR takes seconds a page), at most one write per interval."""
        last = 0.0

        async def report(done: int, total: int) -> None:
            nonlocal last
            now = asyncio.get_running_loop().time()
            if done < total and now - last < self._progress_interval:
                return
            last = now
            await self._queue.report_progress(lease, {"stage": "PARSING", "done": done, "total": total})

        return report

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

    async def _persist_assets(self, lease: Lease, row: dict[str, Any],
                              parsed: ParsedDocument) -> dict[str, DocumentAsset]:
        """Assets get stable keys; they are stored before their rows, and the rows before READY."""
        kb_id, doc_id = row["knowledge_base_id"], row["id"]
        assets: list[DocumentAsset] = []
        for parsed_asset in parsed.assets:
            ident = asset_id(doc_id, parsed_asset.locator_key, row["content_revision"])
            ext = mimetypes.guess_extension(parsed_asset.mime_type) or ""
            key = asset_object_key(kb_id, doc_id, ident, ext)
            await self._storage.put(key, parsed_asset.data, parsed_asset.mime_type)
            assets.append(DocumentAsset(
                id=ident, document_id=doc_id, knowledge_base_id=kb_id, object_key=key,
                mime_type=parsed_asset.mime_type, size_bytes=len(parsed_asset.data), page=parsed_asset.page,
                description=parsed_asset.description, locator_key=parsed_asset.locator_key,
            ))
        for stale_key in await self._queue.replace_assets(lease, assets, row["content_revision"]):
            await self._storage.delete(stale_key)
        return {a.locator_key: a for a in assets}

    async def _write_snapshot(self, row: dict[str, Any], parser: Any, parsed: ParsedDocument,
                              chunks: list[Chunk]) -> None:
        snapshot = {
            "format_version": SNAPSHOT_FORMAT_VERSION,
            "stage": S.CHUNKING.value,
            "written_at": datetime.now(UTC).isoformat(),
            "document": {"id": str(row["id"]), "knowledge_base_id": str(row["knowledge_base_id"]),
                         "filename": row["filename"], "sha256": row["sha256"],
                         "content_revision": row["content_revision"]},
            "parser": {"name": parser.name, "version": parser.version},
            "metadata": parsed.metadata,
            "chunks": [{"id": str(c.id), "ordinal": c.ordinal, "content": c.content,
                        "token_count": c.token_count, "heading_path": list(c.heading_path),
                        "context": c.context, "locator": c.locator.to_metadata(), "metadata": c.metadata}
                       for c in chunks],
        }
        try:
            await self._snapshots.save(knowledge_base_id=row["knowledge_base_id"], document_id=row["id"],
                                       snapshot=snapshot, revision=row["content_revision"])
        except OSError as exc:
            raise TransientError(f"could not write the chunk snapshot: {exc.strerror or exc}") from exc


def _with_assets(metadata: dict[str, Any], stored: dict[str, DocumentAsset], document_id: Any) -> dict[str, Any]:
    """Swap the chunker's asset locator keys for what a search result links: id, URL, page, type."""
    meta = dict(metadata)
    keys = meta.pop("asset_keys", ())
    links = [{"id": str(a.id), "url": f"/api/documents/{document_id}/assets/{a.id}", "mime_type": a.mime_type,
              "page": a.page, "description": a.description}
             for a in (stored.get(k) for k in keys) if a is not None]
    if links:
        meta["assets"] = links
    return meta


def _note_truncation(chunks: list[Chunk], embedder: object) -> list[Chunk]:
    """An embedder that truncates inputs over its token limit (the HTTP one: providers reject
    them) embeds only the start of a longer chunk: say so in that chunk's metadata."""
    limit = getattr(embedder, "max_tokens", 0)
    if getattr(embedder, "truncate", None) is None or not limit:
        return chunks
    return [replace(c, metadata={**c.metadata, "embedding_truncated": {"tokens": c.token_count, "max_tokens": limit}})
            if c.token_count > limit else c for c in chunks]
