"""Index generations: each knowledge base's vectors live in the generation its settings name
(``index_generation``). Generation 0 is the shared index of the model (``chunk_vectors_<dim>``,
``urag_<model>_<dim>``: where every knowledge base's vectors were before migrations existed);
a migration builds generation N >= 1 in a table / collection of that knowledge base alone
(``cv_<kb>_g<N>``, ``urag_kb<kb>_g<N>_<model>_<dim>``), so dropping the generation that lost is
one DROP. The learned sparse vectors do not depend on the dense model: one table serves every
generation, and only this router writes it.

``IndexGenerations`` is the one vector store the services see (``ports.IndexRouter``): the pipeline
writes each generation of its plan, the services that do not care about generations (delete,
dedup, knowledge-base removal) use the VectorStore part (writes to the current generation,
deletes to every live one, the plan read from PostgreSQL on each call), and search gets its
candidates from the generation of the plan it read (the query embedded with that generation's
model). Migrations use its ``ports.GenerationAdmin`` side (make, find, drop, sweep generations)."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

import psycopg
from psycopg import sql

from ...domain.embedding_models import EmbeddingSpec, Generation, IndexPlan
from ...domain.errors import DatabaseError, GenerationGone, TransientError
from ...domain.lexical import LexicalShare
from ...domain.models import EmbeddedChunk, IndexState, VectorHit
from ...domain.ports import Closable, VectorStore
from ...domain.search import QueryVectors, ScoredChunk, SearchFilters, SearchMode
from ..postgres.database import Database
from ..postgres.errors import caused_by
from ..postgres.sql import load_queries
from .pgvector import PgVectorStore
from .sparse_pg import HybridVectors, PostgresSparseIndex

log = logging.getLogger(__name__)
PG_GENERATION_TABLE = re.compile(r"^cv_([0-9a-f]{32})_g(\d+)$")
COLLECTION_GENERATION = re.compile(r"^urag_kb([0-9a-f]{32})_g(\d+)_")
Q = load_queries("generations.sql", __package__)


def generation_table(kb_id: UUID, generation: int) -> str:
    return f"cv_{kb_id.hex}_g{int(generation)}"


def generation_prefix(kb_id: UUID, generation: int) -> str:
    return f"urag_kb{kb_id.hex}_g{int(generation)}"


def parse_generation(name: str) -> tuple[UUID, int]:
    """(knowledge base, generation) of a generation's table or collection name."""
    found = PG_GENERATION_TABLE.match(name) or COLLECTION_GENERATION.match(name)
    if found is None:
        raise ValueError(f"not an index generation: {name}")
    return UUID(found[1]), int(found[2])


class GenerationStore(VectorStore, Protocol):
    """One generation's dense store: a pgvector table, or a Milvus or Qdrant collection."""

    async def exists(self) -> bool: ...
    async def drop(self) -> None: ...


@runtime_checkable
class CollectionStore(GenerationStore, Protocol):
    """Milvus and Qdrant: every generation's collection is listed and dropped through the base one."""

    async def list_collections(self) -> list[str]: ...
    async def drop(self, name: str | None = None) -> None: ...


DenseFactory = Callable[[EmbeddingSpec, int, UUID], GenerationStore]  # (spec, generation, kb) -> a dense store
PlanReader = Callable[[UUID], Awaitable[IndexPlan | None]]
PlanOf = Callable[[UUID, IndexState], IndexPlan | None]  # the plan from an index state read already


class IndexGenerations:
    def __init__(self, db: Database, make_dense: DenseFactory, read_plan: PlanReader, plan_of: PlanOf,
                 default: EmbeddingSpec) -> None:
        self._db = db
        self._make_dense = make_dense
        self.read_plan = read_plan
        self._plan_of = plan_of
        self.dimension = default.dimension
        self.default = default
        self.sparse = PostgresSparseIndex(db)
        self._stores: dict[tuple[Any, ...], GenerationStore] = {}
        self._ready: set[tuple[Any, ...]] = set()

    def _key(self, kb_id: UUID, g: Generation) -> tuple[Any, ...]:
        return (g.spec.embedder, g.spec.model, g.spec.dimension, g.number) + ((kb_id,) if g.number else ())

    async def dense(self, kb_id: UUID, g: Generation, *, create: bool = True) -> GenerationStore:
        """The generation's dense store, built once per process; ``create``: make its table or
        collection when it is not there yet (never for a generation being dropped)."""
        key = self._key(kb_id, g)
        store = self._stores.get(key)
        if store is None:
            store = self._stores[key] = self._make_dense(g.spec, g.number, kb_id)
        if create and key not in self._ready:
            await store.ensure_ready()
            self._ready.add(key)
        return store

    async def create(self, kb_id: UUID, g: Generation) -> None:
        """A migration's new generation: its table or collection, empty."""
        await self.dense(kb_id, g)

    def generation_of(self, name: str) -> tuple[UUID, int]:
        return parse_generation(name)

    async def existing(self, kb_id: UUID, g: Generation) -> GenerationStore | None:
        """The generation's dense store if its table or collection exists (a migration's is made
        when the migration starts and never again: a write racing an abort must not bring it
        back), else None."""
        key = self._key(kb_id, g)
        if g.number and key not in self._ready:
            store = await self.dense(kb_id, g, create=False)
            if not await store.exists():
                return None
        return await self.dense(kb_id, g)

    async def searchable(self, kb_id: UUID, g: Generation) -> PgVectorStore | HybridVectors:
        """A read never creates a migration's generation: one dropped between reading the plan and
        this call (past the grace period) raises GenerationGone, and the caller reads the plan again."""
        store = await self.existing(kb_id, g)
        if store is None:
            raise GenerationGone(f"index generation {g.number} of {kb_id} is gone")
        return store if isinstance(store, PgVectorStore) else HybridVectors(store, self._db)

    async def plan(self, kb_id: UUID) -> IndexPlan:
        return self._or_default(kb_id, await self.read_plan(kb_id))

    def plan_from(self, kb_id: UUID, state: IndexState) -> IndexPlan:
        """``plan`` from an index state read already (a job's document carries it: no read)."""
        return self._or_default(kb_id, self._plan_of(kb_id, state))

    def _or_default(self, kb_id: UUID, found: IndexPlan | None) -> IndexPlan:
        """No plan (no migrations configured): the default model's first generation."""
        return found or IndexPlan(kb_id, Generation(self.default, 0))

    # -- writes the pipeline makes -------------------------------------------------------------
    async def write(self, kb_id: UUID, items_by_generation: Sequence[tuple[Generation, Sequence[EmbeddedChunk]]],
                    share: LexicalShare | None = None) -> None:
        """Each generation's vectors (embedded with its model): the current one's with the shared
        sparse side (in one statement when both are in PostgreSQL), then a migration's, whose
        generation, if an abort dropped it meanwhile, is skipped. Committed on their own, beside
        the published revision's: a search whose vector scan and chunk read straddle the READY
        commit finds one revision or the other, never neither."""
        if not items_by_generation:
            return
        (first, items), *others = items_by_generation
        current = await self.existing(kb_id, first)
        if current is None:  # dropped: the knowledge base switched models since the plan was read
            raise TransientError("the knowledge base switched to another embedding model while this "
                                 "document was indexed; it is indexed again with the new model")
        if isinstance(current, PgVectorStore):
            await current.upsert_dense_and_sparse(kb_id, items, share=share)  # one statement
        else:
            await current.upsert(kb_id, items)
            await self.sparse.upsert(kb_id, items, share)
        for g, other_items in others:
            store = await self.existing(kb_id, g)
            try:
                if store is not None:
                    await store.upsert(kb_id, other_items)
            except Exception:
                if (await self.plan(kb_id)).target == g:
                    raise
                log.info("index generation %s of %s was dropped while it was written", g.number, kb_id)

    async def drop_generation(self, kb_id: UUID, g: Generation) -> None:
        store = await self.dense(kb_id, g, create=False)
        if g.number == 0:
            await store.delete_by_knowledge_base(kb_id)  # the shared index: only this knowledge base's rows
        else:
            await store.drop()
        key = self._key(kb_id, g)
        self._ready.discard(key)
        self._stores.pop(key, None)

    async def generation_names(self) -> list[str]:
        """Every per-knowledge-base generation's table or collection that exists now."""
        base = await self.dense(UUID(int=0), Generation(self.default, 0))
        if isinstance(base, PgVectorStore):
            rows = await self._db.fetchall(Q["generation_tables"])
            return [r["tablename"] for r in rows]
        assert isinstance(base, CollectionStore)
        return [n for n in await base.list_collections() if COLLECTION_GENERATION.match(n)]

    async def drop_named(self, name: str) -> None:
        base = await self.dense(UUID(int=0), Generation(self.default, 0))
        if isinstance(base, PgVectorStore):
            if PG_GENERATION_TABLE.match(name):
                await self._db.execute(sql.SQL(Q["drop_table"]).format(table=sql.Identifier(name)))
        elif COLLECTION_GENERATION.match(name):
            assert isinstance(base, CollectionStore)
            await base.drop(name)
        self._stores = {k: v for k, v in self._stores.items()
                        if getattr(v, "table", getattr(v, "collection", "")) != name}
        self._ready = {k for k in self._ready if k in self._stores}

    # -- the VectorStore port --------------------------------------------------------------------
    async def ensure_ready(self) -> None:
        await self.dense(UUID(int=0), Generation(self.default, 0))

    async def upsert(self, knowledge_base_id: UUID, items: Sequence[EmbeddedChunk]) -> None:
        plan = await self.plan(knowledge_base_id)
        await self.write(knowledge_base_id, [(plan.current, items)])

    async def _document_kb(self, document_id: UUID) -> UUID | None:
        row = await self._db.fetchone(Q["document_knowledge_base"], (document_id,))
        return row["knowledge_base_id"] if row else None

    async def delete_by_document(self, document_id: UUID) -> None:
        kb_id = await self._document_kb(document_id)
        generations = (await self.plan(kb_id)).generations if kb_id else [Generation(self.default, 0)]
        for g in generations:
            await (await self.dense(kb_id or UUID(int=0), g)).delete_by_document(document_id)
        await self.sparse.delete_by_document(document_id)

    async def delete_document_except(self, document_id: UUID, keep: Sequence[UUID]) -> None:
        """A document's vectors in every live generation, but those of the chunks in ``keep`` (the
        published revision's: they serve until the next swap)."""
        kb_id = await self._document_kb(document_id)
        generations = (await self.plan(kb_id)).generations if kb_id else [Generation(self.default, 0)]
        await self.remove_superseded(kb_id or UUID(int=0), document_id, keep, generations)

    async def remove_superseded(self, kb_id: UUID, document_id: UUID, keep: Sequence[UUID],
                                generations: Sequence[Generation]) -> None:
        """``delete_document_except`` when the caller knows the knowledge base and its live
        generations (the pipeline, right after its READY commit read them): no lookups."""
        sparse_done = False
        for g in generations:
            store = await self.dense(kb_id, g)
            if isinstance(store, PgVectorStore) and not sparse_done:  # one statement for both tables
                await store.delete_document_except(document_id, keep, with_sparse=True)
                sparse_done = True
            else:
                await store.delete_document_except(document_id, keep)
        if not sparse_done:
            await self.sparse.delete_document_except(document_id, keep)

    async def delete_by_knowledge_base(self, knowledge_base_id: UUID) -> None:
        plan = await self.plan(knowledge_base_id)
        for g in plan.generations:
            await self.drop_generation(knowledge_base_id, g)
        await self.sparse.delete_by_knowledge_base(knowledge_base_id)

    async def count_by_document(self, document_id: UUID) -> int:
        kb_id = await self._document_kb(document_id)
        g = (await self.plan(kb_id)).current if kb_id else Generation(self.default, 0)
        return int(await (await self.dense(kb_id or UUID(int=0), g)).count_by_document(document_id))

    async def search(self, knowledge_base_id: UUID, vector: Sequence[float], limit: int,
                     **kwargs: Any) -> list[VectorHit]:
        plan = await self.plan(knowledge_base_id)
        store = await self.searchable(knowledge_base_id, plan.current)
        return list(await store.search(knowledge_base_id, vector, limit, **kwargs))

    async def candidates(self, knowledge_base_id: UUID, query: QueryVectors, limit: int, *, mode: SearchMode,
                         filters: SearchFilters | None = None,
                         plan: IndexPlan | None = None) -> tuple[list[ScoredChunk], bool]:
        plan = plan or await self.plan(knowledge_base_id)
        store = await self.searchable(knowledge_base_id, plan.current)
        try:
            return await store.candidates(knowledge_base_id, query, limit, mode=mode, filters=filters)
        except DatabaseError as exc:
            if not caused_by(exc, psycopg.errors.UndefinedTable):
                raise
            self._ready.discard(self._key(knowledge_base_id, plan.current))  # dropped by another process meanwhile
            raise GenerationGone(str(exc)) from exc

    async def scored(self, knowledge_base_id: UUID, query: QueryVectors, chunk_ids: Sequence[UUID], *,
                     mode: SearchMode, plan: IndexPlan | None = None) -> list[ScoredChunk]:
        """Both similarities of the named chunks in the generation of ``plan`` (``candidates``' twin
        for the chunks a search names rather than finds)."""
        plan = plan or await self.plan(knowledge_base_id)
        store = await self.searchable(knowledge_base_id, plan.current)
        try:
            return await store.scored(knowledge_base_id, query, chunk_ids, mode=mode)
        except psycopg.errors.UndefinedTable as exc:
            self._ready.discard(self._key(knowledge_base_id, plan.current))
            raise GenerationGone(str(exc)) from exc

    async def aclose(self) -> None:
        for store in self._stores.values():
            if isinstance(store, Closable):
                await store.aclose()
