"""Embedding-model migration (SPEC §4 rule 3, docs/pipeline.md "Embedding-model migration"):
every READY document's chunks are embedded with the new model into a new index generation, one
leased item per document, while search keeps reading the current generation. When no item is left
the knowledge base switches generations in one transaction; the generation that lost is dropped
after a grace period (a search that read the settings just before the switch still finds it).

A document in the pipeline when its item comes up is deferred until it is READY (the pipeline
itself embeds new content for both generations while a migration runs). A document that cannot be
embedded with the new model fails its item; the migration then ends FAILED without switching, so
no READY document ever leaves search, and the new generation is dropped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any
from uuid import UUID

from ...domain.embedding_models import EmbeddingSpec, Generation, ItemStatus, MigrationLease, MigrationStatus
from ...domain.embedding_text import stored_embedding_text
from ...domain.errors import (
    ConflictError,
    InvalidRequestError,
    LeaseLostError,
    PermanentError,
    TransientError,
    UnprocessableRequestError,
)
from ...domain.models import Chunk, EmbeddedChunk, KnowledgeBase, SourceLocator
from ...domain.ports import GenerationAdmin, MigrationStore
from ...domain.retry import backoff_seconds
from ..failures import explain
from ..outages import OutageLog
from .models import EmbeddingModels

log = logging.getLogger(__name__)
GONE = ("DELETED", "OUTDATED", "FAILED")  # nothing searchable to embed: the item is skipped


class EmbeddingMigrations:
    def __init__(self, *, repository: MigrationStore, models: EmbeddingModels, indexes: GenerationAdmin,
                 retry_delay_seconds: float, drop_grace_seconds: float, defer_seconds: float = 2.0) -> None:
        self.repository = repository
        self._models = models
        self._indexes = indexes
        self._retry_delay = retry_delay_seconds
        self.drop_grace_seconds = drop_grace_seconds
        self._defer = defer_seconds

    # -- the API side ------------------------------------------------------------------------
    async def start(self, kb: KnowledgeBase, spec: EmbeddingSpec) -> dict[str, Any]:
        current = self._models.current_generation(kb.settings)
        if await self.repository.running_target(kb.id) is not None:
            raise ConflictError("an embedding-model migration is already running for this knowledge base")
        if spec.key == current.spec.key:
            raise UnprocessableRequestError(
                f"the knowledge base already uses {spec.model} ({spec.dimension} dimensions)")
        await self._check_dimension(spec)
        row = await self.repository.start(kb.id, current.to_dict(), spec.to_dict())
        await self._indexes.create(kb.id, Generation.from_dict(row["target"]))  # its table or collection, empty
        await self.repository.conclude(row["id"])  # a knowledge base without documents switches at once
        started = await self.repository.get(row["id"])
        assert started is not None  # the repository never deletes a migration
        return started

    async def _check_dimension(self, spec: EmbeddingSpec) -> None:
        """An HTTP model is asked once: a dimension it does not produce is a 422 now, not N failures."""
        if spec.embedder != "openai":
            return
        try:
            async with self._models.trial(spec) as embedder:  # a refused model leaves no embedder behind
                vectors = await embedder.embed_documents(["dimension check"])
        except (InvalidRequestError, PermanentError) as exc:
            # the provider's own words (its URL, its error body, which may echo the key) go to the
            # log; every reader of the knowledge base sees the reason failures.py gives
            failure = explain(exc)
            log.warning("the embedding server refused the model %s: %s", spec.model, failure.detail)
            raise UnprocessableRequestError(f"the embedding server refused the model {spec.model}: "
                                            f"{failure.reason}") from exc
        except Exception as exc:
            log.warning("could not reach the embedding server for model %s: %s", spec.model, explain(exc).detail)
            raise TransientError(f"could not reach the embedding server: {exc.__class__.__name__}",
                                 service="embedding service") from exc
        got = len(vectors[0]) if vectors else 0
        if got != spec.dimension:
            raise UnprocessableRequestError(
                f"the model {spec.model} returns {got}-dimensional vectors, not {spec.dimension}")

    async def abort(self, kb_id: UUID) -> dict[str, Any] | None:
        """The migration stops and its generation is dropped at once (search never read it)."""
        row = await self.repository.abort(kb_id)
        if row is not None:
            await self._indexes.drop_generation(kb_id, Generation.from_dict(row["target"]))
            await self.repository.mark_dropped(row["id"])
        return row

    # -- the worker side -----------------------------------------------------------------------
    async def run(self, worker_id: str, stop: asyncio.Event, poll_seconds: float, heartbeat_seconds: float) -> None:
        """Items one at a time beside the ingestion jobs; between them, conclude and drop."""
        outage = OutageLog("embedding-model migration", log)
        while not stop.is_set():
            try:
                busy = await self.step(worker_id, heartbeat_seconds)
                outage.succeeded()
            except Exception as exc:
                outage.failed(exc)
                busy = False
            if not busy:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), poll_seconds)

    async def step(self, worker_id: str, heartbeat_seconds: float = 5.0) -> bool:
        """One item, if one is due; else conclude finished migrations and drop what lost. True
        when an item was processed."""
        lease = await self.repository.claim(worker_id)
        if lease is None:
            for migration_id in await self.repository.running_ids():
                await self._conclude(migration_id)
            await self.drop_finished()
            return False
        beat = asyncio.create_task(self._heartbeat(lease, heartbeat_seconds))
        try:
            await self._process(lease)
        except LeaseLostError as exc:
            log.warning("migration item %s: lease lost (%s)", lease.item_id, exc)
            return True
        except Exception as exc:
            # readers see the item's error (the migration's failures[]): the reason failures.py gives,
            # never a provider's URL or body; the raw text goes to the log with the item
            failure = explain(exc)
            log.warning("migration item %s (document %s) failed: %s", lease.item_id, lease.document_id,
                        failure.detail)
            retry_in = None if isinstance(exc, PermanentError) else backoff_seconds(lease.attempt, self._retry_delay)
            await self._quiet(self.repository.fail(lease, failure.reason, retry_in))
        finally:
            beat.cancel()
            with contextlib.suppress(BaseException):
                await beat
        await self._conclude(lease.migration_id)
        return True

    async def _quiet(self, write: Awaitable[None]) -> None:
        with contextlib.suppress(LeaseLostError):
            await write

    async def _heartbeat(self, lease: MigrationLease, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            await self.repository.heartbeat(lease)

    async def _process(self, lease: MigrationLease) -> None:
        migration = await self.repository.get(lease.migration_id)
        if migration is None or migration["status"] != MigrationStatus.RUNNING:
            raise LeaseLostError("the migration is no longer running")
        target = Generation.from_dict(migration["target"])
        status = await self.repository.document_status(lease.document_id)
        if status is None or status in GONE:
            await self.repository.finish(lease, ItemStatus.SKIPPED)
            return
        if status != "READY":  # in the pipeline, which embeds for both generations: look again later
            await self.repository.defer(lease, self._defer)
            return
        rows = await self.repository.document_chunks(lease.document_id)
        kb_id = lease.knowledge_base_id
        texts = [stored_embedding_text(r["content"], r["heading_path"]) for r in rows]
        cached = 0

        async def progress(done: int, total: int, from_cache: int, waiting: bool = False) -> None:
            nonlocal cached
            cached = from_cache

        vectors = await self._models.embedding(target.spec).embed_passages(texts, progress, knowledge_base_id=kb_id)
        items = [EmbeddedChunk(chunk=Chunk(id=r["id"], document_id=r["document_id"], knowledge_base_id=kb_id,
                                           ordinal=r["ordinal"], content=r["content"], token_count=0,
                                           heading_path=tuple(r["heading_path"] or ()), locator=SourceLocator()),
                               embedding=tuple(v)) for r, v in zip(rows, vectors, strict=True)]
        store = await self._indexes.existing(kb_id, target)
        if store is None:
            raise LeaseLostError("the new index generation is gone (the migration was aborted)")
        await self.repository.heartbeat(lease)  # still ours: only then write into the generation
        await store.delete_by_document(lease.document_id)
        await store.upsert(kb_id, items)
        await self.repository.finish(lease, ItemStatus.DONE, chunks=len(items), from_cache=cached)

    async def _conclude(self, migration_id: int) -> None:
        status = await self.repository.conclude(migration_id)
        if status is not None:
            log.info("embedding migration %s: %s", migration_id, status.value)
            await self.drop_finished()

    async def sweep_orphans(self) -> list[str]:
        """Drop index generations (tables, collections) that no knowledge base serves, builds or
        is about to drop; returns their names."""
        live = await self.repository.live_generations()
        dropped: list[str] = []
        for name in await self._indexes.generation_names():
            kb, number = self._indexes.generation_of(name)
            if (kb, number) not in live:
                await self._indexes.drop_named(name)
                dropped.append(name)
        return dropped

    async def drop_finished(self) -> int:
        """Drop the generation each finished migration left behind (after the grace period)."""
        dropped = 0
        for m in await self.repository.to_drop(self.drop_grace_seconds):
            loser = m["source"] if m["status"] == MigrationStatus.SWITCHED else m["target"]
            await self._indexes.drop_generation(m["knowledge_base_id"], Generation.from_dict(loser))
            await self.repository.mark_dropped(m["id"])
            dropped += 1
        return dropped
