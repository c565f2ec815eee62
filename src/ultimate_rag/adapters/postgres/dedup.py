"""Deduplication facts in PostgreSQL: content hashes, MinHash signatures and LSH bands, looked up
under a per-knowledge-base advisory lock so two workers judging near-duplicates at the same moment
decide one after the other (exactly one stays READY). The SQL is in ``dedup.sql``; every function
runs in the caller's (fenced) transaction: the judging's here, the READY commit's that outdates an
older twin in ``pipeline.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from ...domain.dedup import Candidate
from ...domain.models import Lease, StageEntry
from ...domain.status import ALLOWED_TRANSITIONS, DEDUP_MATCHABLE, DocumentStatus, JobStatus, job_sources_of, names
from .database import Connection
from .queue import JobQueue
from .sql import load_queries

Q = load_queries("dedup.sql")
# the lookup as it is, and carrying the document's next stage (set_stage: the pipeline's own entry)
_CANDIDATES = Q["candidates"].replace("{enter}", "")
_CANDIDATES_ENTERING = Q["candidates"].replace(
    "{enter}", f",\n        {load_queries('pipeline.sql')['set_stage']}, updated_at = now()")


def lock_name(knowledge_base_id: UUID) -> str:
    """The name of a knowledge base's deduplication lock: a transaction-level advisory lock, taken
    before any row lock (``JobQueue.fenced``'s ``lock_first``): two workers judging near-duplicates
    in one knowledge base at the same moment decide one after the other."""
    return f"dedup:{knowledge_base_id}"


async def candidates(conn: Connection, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                     bands: list[tuple[int, int]] | None, exempt: list[UUID], hashvalues: list[int] | None = None,
                     record_if_none: bool = False, enter: StageEntry | None = None) -> list[Candidate]:
    """Documents with the same normalized text, and (near mode) those sharing an LSH band; with
    ``record_if_none``, when there is none the judgement is recorded in the same statement (as
    ``record_judgement`` with an empty verdict), and the document enters ``enter`` with it."""
    params = {
        "kb": knowledge_base_id, "doc": document_id, "hash": text_hash, "exempt": exempt or [],
        "band_idx": [b for b, _ in bands or []], "band_hash": [h for _, h in bands or []],
        "matchable": names(DEDUP_MATCHABLE), "minhash": hashvalues, "record_if_none": record_if_none}
    statement = _CANDIDATES
    if enter is not None and record_if_none:
        statement = _CANDIDATES_ENTERING
        params |= {"status": enter.status.value, "progress": Jsonb(enter.progress)}
    rows = await (await conn.execute(statement, params)).fetchall()
    return [Candidate(r["id"], r["filename"], r["content_hash"], list(r["minhash"]) if r["minhash"] else None,
                      r["created_at"], r["source"] or {}) for r in rows]


async def record_judgement(conn: Connection, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str | None,
                           hashvalues: list[int] | None, bands: list[tuple[int, int]] | None,
                           verdict: dict[str, Any]) -> None:
    """Replace the document's hash, signature and bands (a reindex starts over), and record its
    verdict: one statement, then the bands (near mode)."""
    await conn.execute(Q["set_judgement"], {"hash": text_hash, "minhash": hashvalues, "verdict": Jsonb(verdict),
                                            "id": document_id})
    if bands:
        async with conn.cursor() as cur:
            await cur.executemany(Q["insert_band"], [(document_id, knowledge_base_id, b, h) for b, h in bands])


async def record_content_hash(conn: Connection, document_id: UUID, text_hash: str) -> None:
    await conn.execute(Q["set_content_hash"], {"hash": text_hash, "id": document_id})


async def outdate(conn: Connection, *, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool:
    """Make ``older`` OUTDATED (duplicate_of = ``newer``): its chunks and hash bands go, its job ends
    (a worker still on it loses its lease), and the documents outdated in its favour before now
    name ``newer`` (never a document that is itself OUTDATED). Locks its job row, then its document row. Returns False
    when it is no longer in a state that can be outdated."""
    await conn.execute(Q["lock_job"], {"id": older})
    row = await (await conn.execute(Q["lock_document"], {"id": older})).fetchone()
    if row is None or (row["status"], DocumentStatus.OUTDATED) not in ALLOWED_TRANSITIONS:
        return False
    await conn.execute(Q["end_outdated_job"], {"id": older, "sources": names(job_sources_of(JobStatus.SUCCEEDED))})
    await conn.execute(Q["delete_chunks"], {"id": older})
    await conn.execute(Q["delete_bands"], {"id": older})
    await conn.execute(Q["outdate_document"], {"newer": newer, "verdict": Jsonb(verdict), "id": older})
    await conn.execute(Q["repoint_duplicates"], {"newer": newer, "id": older})
    return True


@dataclass
class _Session:
    """``ports.DedupSession`` on one fenced transaction."""

    conn: Connection
    current: DocumentStatus
    outdated: list[UUID] = field(default_factory=list)  # documents this transaction made OUTDATED

    async def candidates(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str,
                         bands: list[tuple[int, int]] | None, exempt: list[UUID],
                         hashvalues: list[int] | None = None, record_if_none: bool = False,
                         enter: StageEntry | None = None) -> list[Candidate]:
        return await candidates(self.conn, knowledge_base_id=knowledge_base_id, document_id=document_id,
                                text_hash=text_hash, bands=bands, exempt=exempt, hashvalues=hashvalues,
                                record_if_none=record_if_none, enter=enter)

    async def record_judgement(self, *, knowledge_base_id: UUID, document_id: UUID, text_hash: str | None,
                               hashvalues: list[int] | None, bands: list[tuple[int, int]] | None,
                               verdict: dict[str, Any]) -> None:
        await record_judgement(self.conn, knowledge_base_id=knowledge_base_id, document_id=document_id,
                               text_hash=text_hash, hashvalues=hashvalues, bands=bands, verdict=verdict)

    async def record_content_hash(self, document_id: UUID, text_hash: str) -> None:
        await record_content_hash(self.conn, document_id, text_hash)

    async def outdate(self, *, older: UUID, newer: UUID, verdict: dict[str, Any]) -> bool:
        done = await outdate(self.conn, older=older, newer=newer, verdict=verdict)
        if done:
            self.outdated.append(older)
        return done


class PostgresDedupStore:
    """``ports.DedupStore``: judging happens in the job queue's fenced transaction, after the
    knowledge base's deduplication lock (taken before any row lock)."""

    def __init__(self, queue: JobQueue) -> None:
        self._queue = queue

    @asynccontextmanager
    async def judging(self, lease: Lease, knowledge_base_id: UUID) -> AsyncIterator[_Session]:
        async with lease.end.writing():  # judging the document the older twin ends its job
            async with self._queue.fenced(lease, lock_name(knowledge_base_id)) as (conn, current):
                session = _Session(conn, current)
                yield session
            if lease.document_id in session.outdated:
                lease.end.finished()
