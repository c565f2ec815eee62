"""The ingestion pipeline (SPEC §5, seed 002 §5): parse -> chunk (+assets, snapshot) -> embed ->
index -> READY. Status before action: each stage is committed before its work starts. Every write
goes through the pipeline store's fenced methods (``ports.PipelineStore``), so a worker that lost
its lease commits nothing; the READY commit gets its contents as data (``ReadyCommit``)."""

from __future__ import annotations

import logging
import mimetypes
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar
from uuid import UUID

from ..domain.errors import InvalidDocumentError, ResourceNotFoundError, TransientError, UltimateRagError
from ..domain.ids import asset_id, asset_object_key
from ..domain.models import (
    SNAPSHOT_FORMAT_VERSION,
    Chunk,
    DocumentAsset,
    DocumentSource,
    EmbeddedChunk,
    IndexState,
    Lease,
    ParsedAsset,
    ParsedDocument,
    PipelineDocument,
    ReadyCommit,
    StageEntry,
    figure_text,
)
from ..domain.ports import (
    Chunker,
    ChunkSnapshotStore,
    IndexGenerationsPort,
    IndexPlanView,
    ObjectStorage,
    ParserResolver,
    ParseRunnerPort,
    PipelineStore,
    VectorStore,
)
from ..domain.status import DocumentStatus as S
from ..offload import run_sized
from .dedup import Deduplicator
from .embedding import EmbeddingService
from .progress import EmbeddingProgress, parse_progress

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
                 embedding: EmbeddingService, vectors: VectorStore, snapshots: ChunkSnapshotStore,
                 parse_runner: ParseRunnerPort, default_chunk_size: int, default_overlap: int,
                 progress_interval: float = 1.0, generations: IndexGenerationsPort | None = None,
                 vision: Any = None, dedup: Deduplicator | None = None, centroids: Any = None,
                 models: Any = None) -> None:
        self._store = store
        self._models = models  # EmbeddingModels: each knowledge base's own embedder (services/embedding_models.py)
        self._centroids = centroids  # LanguageCentroids: per-language means for search's language centring
        self._storage = storage
        self._parsers = parsers
        self._chunker = chunker
        self._embedding = embedding
        self._vectors = vectors
        self._generations = generations  # the index generations (embedding-model migrations), or None
        self._snapshots = snapshots
        self._chunk_size = default_chunk_size
        self._overlap = default_overlap
        self._progress_interval = progress_interval
        self._parse_runner = parse_runner
        self._vision = vision  # an image describer (adapters/vision) or None
        self._dedup = dedup

    async def process(self, lease: Lease) -> dict[str, str] | None:
        """Run the pipeline for the leased document; returns the stage timestamps of the run that
        made it READY (None when it was READY already, or ended OUTDATED as an older duplicate)."""
        doc = lease.document or await self._store.load_document(lease.document_id)  # read by the claim
        if doc is None:
            raise ResourceNotFoundError("the document no longer exists")
        if doc.status == S.READY:  # idempotent: nothing to do, the job just completes
            await self._store.complete_already_ready(lease)
            return None

        kb_settings, kb_id = doc.kb_settings, doc.knowledge_base_id
        gens = self._generations
        plan = gens.plan_from(kb_id, doc.index_state) if gens is not None else None
        embedding = self._models.embedding(plan.current.spec) if plan and self._models else self._embedding
        try:  # the source and the parser for it, then PARSING (with that parser) in one write
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
        parsed = await _deterministic(self._parse_runner.parse(parser, source, pages), "parse the file")
        parsed = await self._describe_images(parsed)
        warnings = [str(w) for w in parsed.metadata.get("warnings") or ()]
        if warnings:
            await self._store.record_warnings(lease, warnings)

        await self._store.enter_stage(lease, S.CHUNKING)
        chunks = await _deterministic(run_sized(
            sum(len(block.text) for block in parsed.blocks), self._chunker.split, parsed, document_id=doc.id,
            knowledge_base_id=kb_id,
            revision=doc.content_revision, chunk_size=kb_settings.chunk_size_tokens or self._chunk_size,
            overlap=kb_settings.chunk_overlap_tokens if kb_settings.chunk_size_tokens else self._overlap,
        ), "split the file into chunks")
        if not chunks:
            raise InvalidDocumentError("the document contains no text to index")
        stored = await self._persist_assets(lease, doc, parsed)
        chunks = [replace(c, metadata=_with_assets(c.metadata, stored, doc.id) | {
            "filename": doc.filename, "source_locator": c.locator.to_metadata()}) for c in chunks]
        chunks = _note_truncation(chunks, embedding.embedder)
        await self._write_snapshot(doc, parser, parsed, chunks)
        total = len(chunks)
        entered = {"stage": "EMBEDDING", "done": 0, "total": total, "from_cache": 0}
        entry = StageEntry(S.EMBEDDING, entered)
        decision = await self._dedup.judge(lease, doc, parsed, entry) if self._dedup else None
        if decision is not None and decision.outdated_self:
            return None  # the older of two duplicates: OUTDATED, nothing embedded
        if decision is None or not decision.entered:  # else written with the verdict
            await self._store.enter_stage(lease, S.EMBEDDING, entered)
        texts = [c.embedding_text for c in chunks]
        report = EmbeddingProgress(self._store, lease, self._progress_interval, final=False,  # INDEXING follows
                                   shown=entered)
        vectors, sparse = await embedding.embed_with_sparse(texts, report, knowledge_base_id=kb_id)
        embedded = [EmbeddedChunk(chunk=c, embedding=tuple(v), sparse=sparse[i] if sparse is not None else None)
                    for i, (c, v) in enumerate(zip(chunks, vectors, strict=True))]
        also = await self._embed_for_target(plan, chunks, texts, kb_id, lease.document_id)

        await self._store.enter_stage(lease, S.INDEXING, {"stage": "INDEXING", "done": 0, "total": total,
                                                          "from_cache": report.from_cache})

        live: list[Any] = []  # the generations live at the commit (read in it): the old vectors go from each

        async def write_vectors() -> None:
            """Committed on their own, beside the published revision's, before the swap: a search
            straddling the swap then finds one revision or the other (the old ones go after it)."""
            if plan is None or gens is None:
                await self._vectors.upsert(kb_id, embedded)
                return
            await gens.write(kb_id, [(plan.current, embedded), *also])

        async def finish(within: object, state: IndexState | None) -> None:
            if plan is not None:  # first: nothing may be published for a generation that is not the current one
                live.extend((await self._check_plan(plan, [plan.current, *(g for g, _ in also)], state)).generations)
            if self._centroids is not None:  # a row every document of the language adds to: locked last
                await self._centroids.add(kb_id, embedding.embedder.name, embedded, within=within)
            await self._snapshots.publish(kb_id, doc.id, doc.content_revision)  # READY readers find its chunks.json

        commit = ReadyCommit(chunks=tuple(chunks), revision=doc.content_revision,
                             outdate=decision.outdate if decision else None,
                             assets=tuple(a.id for a in stored.values()))
        outcome = await self._store.commit_ready(lease, commit, write_vectors=write_vectors,
                                                 finish=finish)
        superseded = outcome.previous_revision is not None or lease.attempt > 1
        await self._after_swap(doc, [c.id for c in chunks], outcome.stale_assets, live, vectors=superseded)
        return outcome.stage_timings

    async def _after_swap(self, doc: PipelineDocument, published: list[UUID], stale_assets: Sequence[str],
                          generations: list[Any], *, vectors: bool = True) -> None:
        """The previous revision's vectors (all but ``published``'s, in each of ``generations``)
        and asset objects go only now, after the swap committed; a failure (or a crash) here leaves
        garbage the janitor removes, never a gap. (Its snapshot was replaced by the new one's
        rename, the commit's last step.) ``vectors`` False: the document's first publication, by
        its job's first attempt, has no other vectors to remove (search served nothing of it, and
        every failed attempt before this job removed its own; what a killed earlier job, or an
        attempt handed back at shutdown under other chunk ids, may have left is not served and is
        the janitor's), so that statement is not sent."""
        try:
            if vectors and generations and self._generations is not None:
                await self._generations.remove_superseded(doc.knowledge_base_id, doc.id, published, generations)
            elif vectors:
                await self._vectors.delete_document_except(doc.id, published)
            for key in stale_assets:
                await self._storage.delete(key)
        except Exception:
            log.exception("could not remove the previous revision of %s; the janitor will", doc.id)

    async def _embed_for_target(self, plan: IndexPlanView | None, chunks: list[Chunk], texts: list[str],
                                kb_id: UUID, document_id: UUID) -> list[tuple[Any, list[EmbeddedChunk]]]:
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

    async def _check_plan(self, plan: IndexPlanView, written: list[Any], state: IndexState | None) -> IndexPlanView:
        """The knowledge base switched generations to one this run did not write (a migration that
        began and ended while it ran): index again rather than serve a document from nowhere.
        Returns the plan as it is now (``state``: as the READY commit read it; None: read here)."""
        assert self._generations is not None  # a plan exists only with generations
        kb_id = plan.knowledge_base_id
        now = self._generations.plan_from(kb_id, state) if state is not None else await self._generations.plan(kb_id)
        if now.current not in written:
            raise TransientError("the knowledge base switched to another embedding model while this document was "
                                 "indexed; it is indexed again with the new model")
        return now

    async def cleanup_partial_index(self, lease: Lease) -> None:
        """A failed attempt: the vectors it wrote go; the published revision's stay and serve."""
        keep = await self._store.published_chunk_ids(lease.document_id)
        await self._vectors.delete_document_except(lease.document_id, keep)

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

    async def _write_snapshot(self, doc: PipelineDocument, parser: Any, parsed: ParsedDocument,
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
