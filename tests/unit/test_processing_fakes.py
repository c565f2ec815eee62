"""The pipeline on in-memory fakes of its database ports (``tests/unit/pipeline_fakes.py``: the
queue's leases, the pipeline store, the deduplication store, fenced and checked against the
transition table like the real ones), with the real text parser, chunker, parse runner, object
storage and snapshot store. The embedder and the vector store are fakes too: the local model
costs seconds per test, and the vector stores have their own contract suite; the fake embedder
runs behind the real embedding engine, as every embedder does in production, and the fake vector
store is an index generations router (``ports.IndexRouter``) with one generation. The real-database
versions of these cases are ``tests/integration/test_pipeline*.py``, ``test_dedup*.py`` and
``test_queue*.py``; these run in milliseconds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.adapters.embedders.engine_embedders import EngineEmbedder, apply_engine
from ultimate_rag.adapters.parsers.isolation import ParseRunner
from ultimate_rag.adapters.parsers.text import PlainTextParser
from ultimate_rag.adapters.snapshots.filesystem import FilesystemChunkSnapshotStore
from ultimate_rag.adapters.storage.local import LocalObjectStorage
from ultimate_rag.domain.embedding_models import EmbeddingSpec, Generation, IndexPlan
from ultimate_rag.domain.errors import InvalidDocumentError, InvalidTransitionError, LeaseLostError
from ultimate_rag.domain.lexical import LexicalShare
from ultimate_rag.domain.models import (
    DocumentSource,
    EmbeddedChunk,
    IndexState,
    KnowledgeBaseSettings,
    Lease,
    OlderTwin,
    VectorHit,
)
from ultimate_rag.domain.ports import DedupStore, IndexRouter, JobLeases, Parser, PipelineStore, StreamingEmbedder
from ultimate_rag.domain.search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from ultimate_rag.domain.status import DocumentStatus, JobStatus
from ultimate_rag.services.dedup import Deduplicator
from ultimate_rag.services.embedding import EmbeddingService
from ultimate_rag.services.embedding.models import EmbeddingModels
from ultimate_rag.services.job_loop import IngestionWorker, WorkerConfig
from ultimate_rag.services.processing import DocumentProcessor

from .pipeline_fakes import MemoryDedupStore, MemoryLeases, MemoryPipeline, Row, World

D = DocumentStatus
KB = uuid4()
TEXT = ("The harbour ferry leaves every twenty minutes from pier four, weather permitting, all year long.\n\n"
        "Tickets are sold on board; the last crossing is at half past eleven at night.\n\n"
        "Bicycles travel free outside the morning and evening rush hours.")


class WordEmbedder:
    """Three numbers per text, at no cost; ``on_call`` runs before each batch (a fault, a lost lease)."""

    name = "fake-words"
    dimension = 3
    max_tokens = 512

    def __init__(self, on_call: Callable[[], None] | None = None) -> None:
        self.calls = 0
        self.on_call = on_call

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.on_call is not None:
            self.on_call()
        return [[float(len(t)), 1.0, 0.0] for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return [float(len(text)), 1.0, 0.0]


class MemoryVectors:
    """``ports.IndexRouter`` in a dict, one generation; records whether the job row was held at each write."""

    dimension = 3

    def __init__(self, world: World, spec: EmbeddingSpec) -> None:
        self.world = world
        self.generation = Generation(spec, 0)
        self.items: dict[UUID, EmbeddedChunk] = {}
        self.deleted: list[UUID] = []
        self.written_under_job_lock: list[bool] = []

    async def ensure_ready(self) -> None:
        return None

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None:
        self.written_under_job_lock.append(self.world.holding_job is not None)
        self.items.update({i.chunk.id: i for i in items})

    async def delete_by_document(self, document_id: UUID) -> None:
        self.deleted.append(document_id)
        self.items = {k: v for k, v in self.items.items() if v.chunk.document_id != document_id}

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        self.items = {k: v for k, v in self.items.items() if v.chunk.document_id != document_id or k in keep}

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        self.items = {k: v for k, v in self.items.items() if v.chunk.knowledge_base_id != knowledge_base_id}

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int) -> list[VectorHit]:
        return []

    async def count_by_document(self, document_id: UUID) -> int:
        return sum(1 for v in self.items.values() if v.chunk.document_id == document_id)

    async def plan(self, knowledge_base_id: UUID) -> IndexPlan:
        return IndexPlan(knowledge_base_id, self.generation)

    def plan_from(self, knowledge_base_id: UUID, state: IndexState) -> IndexPlan:
        return IndexPlan(knowledge_base_id, self.generation)

    async def write(self, knowledge_base_id: UUID,
                    items_by_generation: Sequence[tuple[Generation, Sequence[EmbeddedChunk]]],
                    share: LexicalShare | None = None) -> None:
        for _, items in items_by_generation:
            await self.upsert(knowledge_base_id, items)

    async def remove_superseded(self, knowledge_base_id: UUID, document_id: UUID, keep: Sequence[UUID],
                                generations: Sequence[Generation]) -> None:
        await self.delete_document_except(document_id, keep)

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None,
                         plan: IndexPlan | None = None) -> tuple[list[ScoredChunk], bool]:
        return [], True

    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode, plan: IndexPlan | None = None) -> list[ScoredChunk]:
        return []


class TextOnly:
    """``ports.ParserResolver`` with the real plain-text parser alone."""

    parser = PlainTextParser()

    @property
    def parsers(self) -> tuple[Parser, ...]:
        return (self.parser,)

    def resolve(self, source: DocumentSource) -> Parser:
        return self.parser

    def mime_type(self, parser: Parser, source: DocumentSource) -> str:
        return "text/plain"


@dataclass
class Pipeline:
    world: World
    leases: MemoryLeases
    store: MemoryPipeline
    storage: LocalObjectStorage
    vectors: MemoryVectors
    embedder: WordEmbedder
    processor: DocumentProcessor

    async def add(self, text: str, *, created_at: datetime | None = None, dedup: str = "off") -> Row:
        row = self.world.add(KB, "notes.txt", "", created_at=created_at,
                             settings=KnowledgeBaseSettings(chunk_size_tokens=24, chunk_overlap_tokens=0,
                                                            dedup_mode=dedup))
        row.object_key = f"{KB}/{row.id}/source.txt"
        await self.storage.put(row.object_key, text.encode(), "text/plain")
        return row

    async def claim(self) -> Lease:
        [lease] = await self.leases.claim("worker-1")
        return lease

    def worker(self) -> IngestionWorker:
        return IngestionWorker(self.leases, self.processor, WorkerConfig(heartbeat_seconds=30, retry_delay_seconds=2))


_ENGINES: list[EngineEmbedder] = []


@pytest.fixture(autouse=True)
async def _close_engines() -> AsyncIterator[None]:
    yield
    while _ENGINES:
        await _ENGINES.pop().aclose()


def engined(embedder: WordEmbedder) -> StreamingEmbedder:
    """The embedder behind the process's embedding engine, as the composition root wraps every one."""
    wrapped, _ = apply_engine(embedder, None, threads=1, local_batch=8, remote_batch=8, max_in_flight=1, max_wait=0.0)
    _ENGINES.append(wrapped)
    return wrapped


def models_of(embedder: WordEmbedder) -> EmbeddingModels:
    """One embedding model (the knowledge bases' default), behind the engine."""
    def service(model: StreamingEmbedder) -> EmbeddingService:
        return EmbeddingService(model, None, batch_size=8)

    def no_other(spec: EmbeddingSpec) -> StreamingEmbedder:
        raise AssertionError(f"no other model here: {spec}")

    return EmbeddingModels(default=service(engined(embedder)), local=EmbeddingSpec("local", "e5", 384),
                           make_embedder=no_other, make_service=service, openai_configured=True, max_dimension=2000)


def pipeline(tmp_path: Path, embedder: WordEmbedder | None = None) -> Pipeline:
    world = World()
    embedder = embedder or WordEmbedder()
    models = models_of(embedder)
    vectors = MemoryVectors(world, models.default)
    store = MemoryPipeline(world, vectors)
    storage = LocalObjectStorage(tmp_path / "objects")
    processor = DocumentProcessor(
        store=store, storage=storage, parsers=TextOnly(), chunker=StructuredChunker(embedder.count_tokens),
        models=models, indexes=vectors, snapshots=FilesystemChunkSnapshotStore(tmp_path / "snapshots"),
        parse_runner=ParseRunner(isolate=False), default_chunk_size=24, default_overlap=0,
        dedup=Deduplicator(MemoryDedupStore(world), vectors, min_chars=20))
    return Pipeline(world, MemoryLeases(world), store, storage, vectors, embedder, processor)


def test_the_fakes_implement_the_ports(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    leases: JobLeases = p.leases
    store: PipelineStore = p.store
    dedup: DedupStore = MemoryDedupStore(p.world)
    vectors: IndexRouter = p.vectors
    assert leases and store and dedup and vectors


async def test_the_fake_store_fences_every_write_and_follows_the_transition_table(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    row = await p.add(TEXT)
    lease = await p.claim()
    with pytest.raises(InvalidTransitionError):
        await p.store.enter_stage(lease, D.INDEXING)  # PENDING -> INDEXING is not an edge
    await p.store.enter_stage(lease, D.PARSING)
    p.world.steal(row.id)
    for write in (p.store.enter_stage(lease, D.CHUNKING), p.store.report_progress(lease, {"done": 1}),
                  p.store.start_parsing(lease, "text", "1"), p.leases.release(lease)):
        with pytest.raises(LeaseLostError):
            await write
    assert row.status == D.PARSING and row.progress == {} and row.parser is None
    assert await p.leases.heartbeat(lease) is False


async def test_the_happy_path_commits_the_chunks_only_at_ready(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    row = await p.add(TEXT)
    await p.processor.process(await p.claim())
    assert [status for status, _ in p.world.stages] == [D.PARSING, D.CHUNKING, D.EMBEDDING, D.INDEXING]
    assert all(chunk_rows == 0 for _, chunk_rows in p.world.stages)  # nothing committed before READY
    assert (row.status, row.job_status, row.published_revision) == (D.READY, JobStatus.SUCCEEDED, 1)
    [commit] = p.world.commits
    assert commit.outdate is None and len(commit.chunks) >= 2 and row.chunks == commit.chunks
    assert set(p.vectors.items) == {c.id for c in commit.chunks}
    assert p.vectors.written_under_job_lock == [True]  # while the READY commit holds the job row
    assert row.parser == ("text", "1.0.0")


async def test_an_empty_document_is_invalid_before_anything_is_embedded(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    row = await p.add("  \n\n \t \n")
    with pytest.raises(InvalidDocumentError):
        await p.processor.process(await p.claim())
    assert p.embedder.calls == 0 and row.chunks == () and p.world.commits == [] and p.vectors.items == {}


async def test_a_lease_lost_while_embedding_commits_nothing(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    row = await p.add(TEXT)
    p.embedder.on_call = lambda: p.world.steal(row.id)  # another worker reclaims the job meanwhile
    with pytest.raises(LeaseLostError):
        await p.processor.process(await p.claim())
    assert p.embedder.calls >= 1
    assert row.status == D.EMBEDDING and row.chunks == () and row.published_revision is None
    assert p.world.commits == [] and p.vectors.items == {}


async def test_the_older_twin_is_outdated_at_once_and_not_embedded(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    now = datetime.now(UTC)
    newer = await p.add(TEXT, created_at=now, dedup="exact")
    older = await p.add(TEXT, created_at=now - timedelta(hours=1), dedup="exact")
    await p.processor.process(await p.claim())  # the newer first: READY, nothing to compare with
    calls = p.embedder.calls
    await p.processor.process(await p.claim())
    assert (older.status, older.duplicate_of, older.verdict["role"]) == (D.OUTDATED, newer.id, "older")
    assert older.job_status == JobStatus.SUCCEEDED and older.chunks == ()
    assert p.embedder.calls == calls and len(p.world.commits) == 1  # the newer's commit only
    assert newer.status == D.READY


async def test_the_newer_twins_ready_commit_carries_the_outdate(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    now = datetime.now(UTC)
    older = await p.add(TEXT, created_at=now - timedelta(hours=1), dedup="exact")
    newer = await p.add(TEXT, created_at=now, dedup="exact")
    await p.processor.process(await p.claim())
    assert older.status == D.READY and older.chunks
    locks = p.world.dedup_locks
    await p.processor.process(await p.claim())
    commit = p.world.commits[-1]
    assert commit.outdate == OlderTwin(older.id, KB, {**newer.verdict, "compared_document_id": str(newer.id),
                                                      "role": "older"})
    assert p.world.dedup_locks == locks + 2  # the judging, then the commit: each under the knowledge base's lock
    assert (older.status, older.duplicate_of, older.chunks, older.published_revision) == (D.OUTDATED, newer.id, (), None)
    assert older.id in p.vectors.deleted and await p.vectors.count_by_document(older.id) == 0
    assert newer.status == D.READY and newer.verdict["role"] == "newer"


async def test_an_outage_gives_the_attempt_back(tmp_path: Path) -> None:
    def refuse() -> None:
        raise ConnectionError("connection refused")  # the embedder cannot be reached: not the document's fault

    p = pipeline(tmp_path, WordEmbedder(on_call=refuse))
    row = await p.add(TEXT)
    assert await p.worker().run_until_idle(max_jobs=1) == 1
    assert (row.status, row.job_status, row.attempts, row.max_attempts) == (D.PENDING, JobStatus.PENDING, 1, 4)
    assert row.error_message is not None and "does not count as a failed attempt" in row.error_message


async def test_the_worker_retries_a_transient_failure_after_a_backoff(tmp_path: Path) -> None:
    def refuse() -> None:
        raise TimeoutError("the model took too long")

    p = pipeline(tmp_path, WordEmbedder(on_call=refuse))
    row = await p.add(TEXT)
    assert await p.worker().run_until_idle(max_jobs=1) == 1
    assert (row.status, row.job_status, row.locked_by) == (D.PENDING, JobStatus.PENDING, None)
    assert row.retry_in is not None and row.retry_in > 0
    assert row.error_message is not None and row.error_message.startswith("attempt 1/3 failed temporarily")
    assert row.chunks == () and p.vectors.items == {}


async def test_the_worker_fails_a_permanent_error_at_once(tmp_path: Path) -> None:
    p = pipeline(tmp_path)
    row = await p.add("   \n\n   ")
    assert await p.worker().run_until_idle(max_jobs=1) == 1
    assert (row.status, row.job_status, row.retry_in) == (D.FAILED, JobStatus.FAILED, None)
    assert row.error_message and row.error_message == row.last_error and "attempt" not in row.error_message
