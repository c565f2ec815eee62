"""SPEC §4 rule 3 (revised): search serves each document's published revision — its last revision
that reached READY — in every mode, on pgvector and on Milvus Lite (the store proposes, PostgreSQL
decides). A rebuild is built beside it and swapped in at its READY commit; a failed rebuild keeps
the previous revision served and says so; delete unpublishes at once; the 409 rules are unchanged."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import httpx

from ultimate_rag.services.job_loop import WorkerConfig

from .test_search_hybrid import backend, milvus_server, settings  # noqa: F401 - the store-parametrised fixtures

MODES = ("hybrid", "dense", "sparse")
OLD = b"# Ferry\n\nThe ferry to Lindholm leaves at nine from pier four, every day of the week.\n"
NEW = b"# Ferry\n\nThe ferry to Lindholm now leaves at ten from pier seven; the new timetable code is QUOKKA.\n"
QUERY = "ferry to Lindholm timetable"


async def run_worker(container) -> None:
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()


async def ready_doc(client: httpx.AsyncClient, container, kb: str, data: bytes = OLD,
                    name: str = "ferry.md") -> str:
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, data, "text/markdown")})
    assert r.status_code == 202, r.text
    await run_worker(container)
    doc = (await client.get(f"/api/documents/{r.json()['id']}")).json()
    assert doc["status"] == "READY" and doc["searchable"] and doc["published_revision"] == 1, doc
    return str(doc["id"])


async def make_kb(client: httpx.AsyncClient) -> str:
    from uuid import uuid4

    r = await client.post("/api/knowledge-bases", json={"name": f"kb-{uuid4().hex[:6]}"})
    return str(r.json()["id"])


async def served(client: httpx.AsyncClient, kb: str, doc: str, mode: str = "hybrid") -> list[str]:
    """The contents search returns for ``doc``."""
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": QUERY, "top_k": 20, "mode": mode})
    assert r.status_code == 200, r.text
    return [h["content"] for h in r.json()["results"] if h["document_id"] == doc]


async def document(client: httpx.AsyncClient, doc: str) -> dict[str, Any]:
    r = await client.get(f"/api/documents/{doc}")
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_rebuild_serves_the_previous_revision_until_its_swap(client, container) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    old_chunks = {c["id"] for c in (await client.get(f"/api/documents/{doc}/chunks")).json()["items"]}

    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("ferry.md", NEW, "text/markdown")})
    assert r.status_code == 202, r.text
    body = r.json()
    assert (body["status"], body["searchable"], body["published_revision"], body["content_revision"]) == (
        "PENDING", True, 1, 2)
    for mode in MODES:
        found = await served(client, kb, doc, mode)
        assert found and all("nine" in c for c in found), (mode, found)

    # the moment the new revision's vectors are in the store, before the swap commits: the store
    # proposes them, PostgreSQL still serves only the published revision
    seen_before_swap: dict[str, list[str]] = {}
    store, write = container.embedding.indexes, container.embedding.indexes.write  # the knowledge base's index generations

    async def write_then_search(kb_id: UUID, items: Any, *more: Any) -> None:
        await write(kb_id, items, *more)
        assert (await document(client, doc))["status"] == "INDEXING"
        for mode in MODES:
            seen_before_swap[mode] = await served(client, kb, doc, mode)

    store.write = write_then_search
    try:
        await run_worker(container)
    finally:
        del store.write
    assert set(seen_before_swap) == set(MODES)
    for mode, found in seen_before_swap.items():
        assert found and all("nine" in c and "QUOKKA" not in c for c in found), (mode, found)

    after = await document(client, doc)
    assert (after["status"], after["searchable"], after["published_revision"], after["content_revision"]) == (
        "READY", True, 2, 2)
    for mode in MODES:
        found = await served(client, kb, doc, mode)
        assert found and all("QUOKKA" in c for c in found), (mode, found)
    chunks = (await client.get(f"/api/documents/{doc}/chunks")).json()["items"]
    assert not {c["id"] for c in chunks} & old_chunks  # new ids, beside the old ones until the swap
    assert await container.embedding.default_index.count_by_document(UUID(doc)) == len(chunks)  # the old ones went after it
    snapshot = (await client.get(f"/api/documents/{doc}/snapshot")).json()
    assert snapshot["document"]["content_revision"] == 2


async def test_a_failed_rebuild_keeps_the_previous_revision_served_and_says_so(client, container) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    chunk_count = (await document(client, doc))["chunk_count"]
    # new bytes with no text: the rebuild fails for good at CHUNKING
    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("ferry.md", b"#\n\n   \n", "text/markdown")})
    assert r.status_code == 202, r.text
    await run_worker(container)
    failed = await document(client, doc)
    assert failed["status"] == "FAILED" and failed["searchable"] and failed["published_revision"] == 1
    assert "no text" in failed["error_message"]
    assert failed["error_message"].endswith("(the previous version, revision 1, is still searchable)")
    assert failed["chunk_count"] == chunk_count
    for mode in MODES:
        found = await served(client, kb, doc, mode)
        assert found and all("nine" in c for c in found), (mode, found)
    assert await container.embedding.default_index.count_by_document(UUID(doc)) == chunk_count

    # delete unpublishes at once, before any worker runs
    assert (await client.delete(f"/api/documents/{doc}")).status_code == 202
    assert not (await document(client, doc))["searchable"]
    for mode in MODES:
        assert await served(client, kb, doc, mode) == []


async def test_operator_fail_of_a_rebuild_keeps_the_previous_revision(client, container) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202
    queued = await document(client, doc)
    assert (queued["status"], queued["searchable"], queued["published_revision"], queued["content_revision"]) == (
        "PENDING", True, 1, 2)
    # the 409 rules are unchanged while it is rebuilt (a delete would be accepted: it replaces the
    # queued rebuild, tests/integration/test_fair_queue.py)
    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 409
    r = await client.put(f"/api/documents/{doc}/content", files={"file": ("ferry.md", NEW, "text/markdown")})
    assert r.status_code == 409
    assert await served(client, kb, doc)

    r = await client.post(f"/api/documents/{doc}/fail")
    assert r.status_code == 200, r.text
    failed = await document(client, doc)
    assert failed["status"] == "FAILED" and failed["searchable"] and failed["published_revision"] == 1
    assert failed["error_message"] == "cancelled by operator (the previous version, revision 1, is still searchable)"
    assert await served(client, kb, doc)
    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202
    await run_worker(container)
    again = await document(client, doc)
    assert (again["status"], again["published_revision"], again["error_message"]) == ("READY", 3, None)


async def test_a_document_that_never_reached_ready_is_never_searchable(client, container) -> None:
    kb = await make_kb(client)
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("e.md", b"#\n\n  \n", "text/markdown")})
    doc = r.json()["id"]
    assert r.json()["searchable"] is False and r.json()["published_revision"] is None
    await run_worker(container)
    failed = await document(client, doc)
    assert failed["status"] == "FAILED" and not failed["searchable"]
    assert not failed["error_message"].endswith("still searchable)")


async def test_deleting_the_knowledge_base_during_a_rebuild_hides_it_at_once(client, container) -> None:
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)
    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202
    assert (await client.delete(f"/api/knowledge-bases/{kb}")).status_code == 202
    assert not (await document(client, doc))["searchable"]
    assert await served(client, kb, doc) == []


async def test_bulk_reindex_is_a_rolling_rebuild_with_progress(client, container) -> None:
    kb = await make_kb(client)
    assert (await client.get(f"/api/knowledge-bases/{kb}/reindex")).json() == {
        "started_at": None, "queued": 0, "rebuilt": 0, "pending": 0, "failed": 0, "removed": 0, "searchable": 0,
        "queuing": False, "finished": True}
    docs = [await ready_doc(client, container, kb, OLD.replace(b"four", f"four (copy {i})".encode()), f"f{i}.md")
            for i in range(3)]
    r = await client.post(f"/api/knowledge-bases/{kb}/reindex")
    assert r.status_code == 202 and r.json() == {"queued": 3, "skipped_active": 0}
    progress = (await client.get(f"/api/knowledge-bases/{kb}/reindex")).json()
    assert (progress["queued"], progress["pending"], progress["rebuilt"], progress["searchable"],
            progress["finished"]) == (3, 3, 0, 3, False)
    for doc in docs:  # nothing left search
        assert await served(client, kb, doc)
    await run_worker(container)
    progress = (await client.get(f"/api/knowledge-bases/{kb}/reindex")).json()
    assert (progress["queued"], progress["pending"], progress["rebuilt"], progress["failed"],
            progress["finished"]) == (3, 0, 3, 0, True)
    for doc in docs:
        assert (await document(client, doc))["published_revision"] == 2


async def test_a_bulk_reindex_is_not_finished_before_its_first_batch(client, container) -> None:
    """Between the knowledge base's stamp and its first batch, nothing of the new rebuild is pending
    yet: the progress says it is still queueing, never "finished" with nothing searchable."""
    from ultimate_rag.adapters.postgres.lifecycle import Q

    kb = await make_kb(client)
    await ready_doc(client, container, kb, OLD, "a.md")
    await container.infra.db.execute(Q["start_rebuild"], {"kb": kb})  # the bulk reindex's first statement
    progress = (await client.get(f"/api/knowledge-bases/{kb}/reindex")).json()
    assert (progress["queued"], progress["queuing"], progress["finished"]) == (0, True, False)
    assert (await client.post(f"/api/knowledge-bases/{kb}/reindex")).json()["queued"] == 1  # a whole one
    progress = (await client.get(f"/api/knowledge-bases/{kb}/reindex")).json()
    assert (progress["queued"], progress["queuing"], progress["finished"]) == (1, False, False)
    await run_worker(container)
    progress = (await client.get(f"/api/knowledge-bases/{kb}/reindex")).json()
    assert (progress["rebuilt"], progress["searchable"], progress["finished"]) == (1, 1, True)


async def test_a_crash_between_swap_and_cleanup_leaves_only_what_the_janitor_removes(
        client, container, settings, backend) -> None:  # noqa: F811
    kb = await make_kb(client)
    doc = await ready_doc(client, container, kb)

    async def crashed(*_: Any) -> None:  # the process died right after the READY commit
        return None

    container.ingest.processor._ready.after_swap = crashed
    try:
        r = await client.put(f"/api/documents/{doc}/content", files={"file": ("ferry.md", NEW, "text/markdown")})
        assert r.status_code == 202
        await run_worker(container)
    finally:
        del container.ingest.processor._ready.after_swap
    chunks = (await client.get(f"/api/documents/{doc}/chunks")).json()["items"]
    assert await container.embedding.default_index.count_by_document(UUID(doc)) > len(chunks)  # the old revision's are left
    for mode in MODES:  # the store proposes them, PostgreSQL serves the published revision only
        found = await served(client, kb, doc, mode)
        assert found and all("QUOKKA" in c for c in found), (mode, found)
    folder = settings.snapshots_dir / kb / doc
    assert (await client.get(f"/api/documents/{doc}/snapshot")).json()["document"]["content_revision"] == 2

    await container.maintenance.janitor.with_grace(0).sweep()
    if backend["vector_store"] == "pgvector":  # the janitor sweeps the vectors it can see (pgvector's table)
        assert await container.embedding.default_index.count_by_document(UUID(doc)) == len(chunks)
    assert not list(folder.glob("chunks.r*.json"))
    assert json.loads((folder / "chunks.json").read_text())["document"]["content_revision"] == 2


async def test_a_rebuild_judged_an_older_duplicate_leaves_search(client, container) -> None:
    """Dedup and rebuilds: the older document re-uploaded with the newer one's content is judged the
    older of two duplicates (SPEC §8): OUTDATED, which unpublishes it at once; the newer one serves."""
    kb = await make_kb(client)
    older = await ready_doc(client, container, kb, OLD, "a.md")
    newer = await ready_doc(client, container, kb, NEW, "b.md")
    r = await client.put(f"/api/documents/{older}/content", files={"file": ("a.md", NEW, "text/markdown")})
    assert r.status_code == 202, r.text
    await run_worker(container)
    old_state, new_state = await document(client, older), await document(client, newer)
    assert old_state["status"] == "OUTDATED" and not old_state["searchable"], old_state
    assert await served(client, kb, older) == []
    assert new_state["status"] == "READY" and new_state["searchable"]
    assert await served(client, kb, newer)
