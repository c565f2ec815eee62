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

from dataclasses import dataclass
from datetime import UTC, datetime

from ..domain import dedup as rules
from ..domain.dedup import Decision
from ..domain.errors import LeaseLostError
from ..domain.models import Lease, OlderTwin, ParsedDocument, PipelineDocument, StageEntry
from ..domain.ports import DedupStore, VectorStore
from ..domain.status import ALLOWED_TRANSITIONS, DocumentStatus, check_transition
from ..offload import run_sized


@dataclass(frozen=True)
class Signature:
    text_hash: str
    hashvalues: list[int] | None
    bands: list[tuple[int, int]] | None


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

    async def judge(self, lease: Lease, document: PipelineDocument, parsed: ParsedDocument,
                    enter: StageEntry | None = None) -> Decision:
        """The verdict on ``document``, recorded on it; the older twin is outdated at once when it
        is this document, else the decision names it for this document's READY commit. ``enter``:
        the stage the document goes on to when it stays; a unique document (the common case)
        enters it with the verdict's own write (``Decision.entered``), one statement fewer."""
        settings = document.kb_settings
        mode = rules.DedupMode(settings.dedup_mode)
        if mode == rules.DedupMode.OFF:
            return Decision()
        content = rules.document_content(parsed)
        kb_id, doc_id = document.knowledge_base_id, document.id
        if content.amount < self._min_chars:
            async with self._store.judging(lease, kb_id) as session:
                await session.record_judgement(  # never a candidate either
                    knowledge_base_id=kb_id, document_id=doc_id, text_hash=None, hashvalues=None, bands=None,
                    verdict={"skipped": f"too little text to compare ({content.amount} characters of its own, "
                                        f"the minimum is {self._min_chars})", "mode": mode.value})
            return Decision()
        signature = await run_sized(len(content.text), compute_signature, content, mode)
        async with self._store.judging(lease, kb_id) as session:
            if enter is not None and (session.current, enter.status) not in ALLOWED_TRANSITIONS:
                enter = None  # the caller's own fenced entry says why
            found = await session.candidates(knowledge_base_id=kb_id, document_id=doc_id,
                                             text_hash=signature.text_hash, bands=signature.bands,
                                             exempt=list(document.dedup_exempt), hashvalues=signature.hashvalues,
                                             record_if_none=True, enter=enter)
            if not found:  # unique: its judgement was recorded with the lookup, and the stage entered
                return Decision(entered=enter is not None)
            match = rules.judge(filename=document.filename, text_hash=signature.text_hash,
                                hashvalues=signature.hashvalues, candidates=found, mode=mode,
                                threshold=settings.near_duplicate_threshold)
            if match is None:
                await session.record_judgement(knowledge_base_id=kb_id, document_id=doc_id,
                                               text_hash=signature.text_hash, hashvalues=signature.hashvalues,
                                               bands=signature.bands, verdict={})
                return Decision()
            other = next(c for c in found if c.document_id == match.document_id)
            self_newer = rules.is_newer((document.created_at, document.source, doc_id),
                                        (other.created_at, other.source, other.document_id))
            verdict = {"verdict": match.verdict.value, "score": match.score, "method": match.method,
                       "compared_document_id": str(match.document_id), "mode": mode.value,
                       "decided_at": datetime.now(UTC).isoformat()}
            if self_newer:
                await session.record_judgement(knowledge_base_id=kb_id, document_id=doc_id,
                                               text_hash=signature.text_hash, hashvalues=signature.hashvalues,
                                               bands=signature.bands, verdict={**verdict, "role": "newer"})
                twin = OlderTwin(match.document_id, kb_id,
                                 {**verdict, "compared_document_id": str(doc_id), "role": "older"})
                return Decision(outdate=twin, verdict=verdict)
            check_transition(session.current, DocumentStatus.OUTDATED)
            await session.record_content_hash(doc_id, signature.text_hash)
            outdated = await session.outdate(older=doc_id, newer=match.document_id,
                                             verdict={**verdict, "role": "older"})
            if not outdated:
                raise LeaseLostError("the document changed while it was judged")
        await self._vectors.delete_by_document(doc_id)
        return Decision(outdated_self=True, verdict=verdict)
