"""Deduplication during processing (SPEC §8, seed 004 "dedup"), after parsing and before embedding
so that a duplicate costs no embeddings.

The verdict is taken under the knowledge base's deduplication lock, against documents that are
READY or on their way with a recorded signature: two near-duplicates judged at the same moment are
judged one after the other, so exactly one of them ends READY. The older of a pair (by source
modification time when known, else upload time) becomes OUTDATED with ``duplicate_of`` = the
newer: at once when the document being processed is the older, or in the same commit that makes
the newer READY (so a newer document that then fails never leaves its older twin hidden).

What is compared is the document's own text (parser-made figure placeholders left out) and its
assets' bytes; a document with less than ``min_chars`` non-space characters of its own text is
never judged a duplicate nor matched by another (an image-only PDF, a page that says "Test")."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from ..domain import dedup as rules
from ..domain.errors import LeaseLostError
from ..domain.models import KnowledgeBaseSettings, Lease, ParsedDocument
from ..domain.ports import DedupStore, VectorStore
from ..domain.status import DocumentStatus, check_transition


@dataclass(frozen=True)
class Signature:
    text_hash: str
    hashvalues: list[int] | None
    bands: list[tuple[int, int]] | None


@dataclass(frozen=True)
class Decision:
    outdated_self: bool = False  # this document is the older twin: it is OUTDATED already
    older: UUID | None = None  # the older twin to outdate when this document becomes READY
    verdict: dict[str, Any] | None = None


DEFAULT_MIN_CHARS = 50


def compute_signature(content: rules.Content, mode: rules.DedupMode) -> Signature:
    text_hash = content.fingerprint()
    if mode != rules.DedupMode.NEAR:
        return Signature(text_hash, None, None)
    from datasketch import MinHash

    minhash = MinHash(num_perm=rules.NUM_PERM, seed=1)
    units = rules.shingles(content.text) | {f"asset:{h}" for h in content.asset_hashes}
    minhash.update_batch([s.encode("utf-8") for s in units])
    values = [int(v) for v in minhash.hashvalues]
    return Signature(text_hash, values, rules.bands(values))


class Deduplicator:
    def __init__(self, store: DedupStore, vectors: VectorStore, min_chars: int = DEFAULT_MIN_CHARS) -> None:
        self._store = store
        self._vectors = vectors
        self._min_chars = min_chars

    async def judge(self, lease: Lease, row: dict[str, Any], parsed: ParsedDocument,
                    settings: KnowledgeBaseSettings) -> Decision:
        mode = rules.DedupMode(settings.dedup_mode)
        if mode == rules.DedupMode.OFF:
            return Decision()
        content = rules.document_content(parsed)
        kb_id, doc_id = row["knowledge_base_id"], row["id"]
        if content.amount < self._min_chars:
            async with self._store.judging(lease, kb_id) as session:
                await session.record_signature(knowledge_base_id=kb_id, document_id=doc_id, text_hash=None,
                                               hashvalues=None, bands=None)  # never a candidate either
                await session.record_verdict(doc_id, {
                    "skipped": f"too little text to compare ({content.amount} characters of its own, "
                               f"the minimum is {self._min_chars})", "mode": mode.value})
            return Decision()
        signature = await asyncio.to_thread(compute_signature, content, mode)
        async with self._store.judging(lease, kb_id) as session:
            found = await session.candidates(knowledge_base_id=kb_id, document_id=doc_id,
                                             text_hash=signature.text_hash, bands=signature.bands,
                                             exempt=list(row.get("dedup_exempt") or []))
            match = rules.judge(filename=row["filename"], text_hash=signature.text_hash,
                                hashvalues=signature.hashvalues, candidates=found, mode=mode,
                                threshold=settings.near_duplicate_threshold)
            if match is None:
                await session.record_signature(knowledge_base_id=kb_id, document_id=doc_id,
                                               text_hash=signature.text_hash, hashvalues=signature.hashvalues,
                                               bands=signature.bands)
                await session.record_verdict(doc_id, {})
                return Decision()
            other = next(c for c in found if c.document_id == match.document_id)
            self_newer = rules.is_newer((row["created_at"], row["source"] or {}, doc_id),
                                        (other.created_at, other.source, other.document_id))
            verdict = {"verdict": match.verdict.value, "score": match.score, "method": match.method,
                       "compared_document_id": str(match.document_id), "mode": mode.value,
                       "decided_at": datetime.now(UTC).isoformat()}
            if self_newer:
                await session.record_signature(knowledge_base_id=kb_id, document_id=doc_id,
                                               text_hash=signature.text_hash, hashvalues=signature.hashvalues,
                                               bands=signature.bands)
                await session.record_verdict(doc_id, {**verdict, "role": "newer"})
                return Decision(older=match.document_id, verdict=verdict)
            check_transition(session.current, DocumentStatus.OUTDATED)
            await session.record_content_hash(doc_id, signature.text_hash)
            outdated = await session.outdate(older=doc_id, newer=match.document_id,
                                             verdict={**verdict, "role": "older"})
            if not outdated:
                raise LeaseLostError("the document changed while it was judged")
        await self._vectors.delete_by_document(doc_id)
        return Decision(outdated_self=True, verdict=verdict)

    def completion_hooks(self, knowledge_base_id: UUID, document_id: UUID, decision: Decision) -> dict[str, Any]:
        """Hooks for the READY commit: outdate the older twin in the same transaction, under the
        knowledge base's deduplication lock (taken before any row lock)."""
        if decision.older is None:
            return {}
        older = decision.older

        async def kb_lock(conn: Any) -> None:
            await self._store.lock_knowledge_base(conn, knowledge_base_id)

        async def outdate_older(conn: Any) -> None:
            if await self._store.outdate(conn, older=older, newer=document_id,
                                         verdict={**(decision.verdict or {}), "compared_document_id": str(document_id),
                                                  "role": "older"}):
                await self._vectors.delete_by_document(older)

        return {"lock_first": kb_lock, "alongside": outdate_older}
