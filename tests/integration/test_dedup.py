"""Deduplication end to end (SPEC §8): exact, identical and similar verdicts in English, Chinese and
Korean; shared boilerplate is not merged; OUTDATED then reindex; two workers judging near-duplicates
at the same moment; hash bands gone with the document; an identical duplicate embeds nothing."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ultimate_rag.services.job_loop import WorkerConfig

from .helpers import use_embedder
from .test_api import make_kb, upload
from .test_pipeline_faults import FlakyEmbedder

EN = "\n\n".join(f"The harbour ferry number {i} leaves at dawn and returns before dark, weather permitting."
                 for i in range(30))
ZH = "\n\n".join(f"第{i}号渡轮每天清晨从港口出发，傍晚之前返回，天气不好时停航。" for i in range(30))
KO = "\n\n".join(f"{i}번 여객선은 새벽에 항구를 떠나 해가 지기 전에 돌아오며 날씨가 나쁘면 쉰다." for i in range(30))


async def run(container) -> None:
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()


async def kb_with(client: httpx.AsyncClient, mode: str, threshold: float = 0.8) -> str:
    r = await client.post("/api/knowledge-bases", json={
        "name": f"dedup-{mode}-{threshold}", "settings": {"dedup_mode": mode, "near_duplicate_threshold": threshold}})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def doc(client: httpx.AsyncClient, doc_id: str) -> dict:
    return (await client.get(f"/api/documents/{doc_id}")).json()


async def test_identical_upload_outdates_the_older_and_reuses_embeddings(client, container, embedder) -> None:
    spy = FlakyEmbedder(embedder, failures=0, error=RuntimeError())
    use_embedder(container, spy)
    kb = await make_kb(client)  # the default mode is exact
    first = (await upload(client, kb, "ferries.md", EN.encode())).json()["id"]
    await run(container)
    calls = spy.calls
    second = (await upload(client, kb, "ferries.md", EN.encode())).json()["id"]
    await run(container)
    old, new = await doc(client, first), await doc(client, second)
    assert (old["status"], old["duplicate_of"]) == ("OUTDATED", second)
    assert old["dedup"]["verdict"] == "identical" and old["dedup"]["role"] == "older"
    assert new["status"] == "READY" and new["dedup"]["compared_document_id"] == first
    assert new["dedup"]["score"] == 1.0 and new["dedup"]["method"] == "exact"
    assert spy.calls == calls  # the identical chunks came from the embedding cache
    assert await container.embedding.default_index.count_by_document(first) == 0 and old["chunk_count"] == 0
    hits = (await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "harbour ferry"})).json()["results"]
    assert {h["document_id"] for h in hits} == {second}


async def test_a_duplicate_points_to_the_searchable_twin_never_to_an_outdated_one(client, container) -> None:
    """v1 is outdated by v2, then v2 by v3: v1 names v3 (the one search serves), not v2."""
    kb = await make_kb(client)
    versions = []
    for _ in range(3):
        versions.append((await upload(client, kb, "ferries.md", EN.encode())).json()["id"])
        await run(container)
    v1, v2, v3 = [await doc(client, d) for d in versions]
    assert (v3["status"], v3["duplicate_of"]) == ("READY", None)
    assert (v2["status"], v2["duplicate_of"]) == ("OUTDATED", v3["id"])
    assert (v1["status"], v1["duplicate_of"]) == ("OUTDATED", v3["id"])


async def test_same_content_under_another_title_is_similar(client, container) -> None:
    kb = await make_kb(client)
    first = (await upload(client, kb, "a.md", KO.encode())).json()["id"]
    await run(container)
    second = (await upload(client, kb, "b.md", KO.encode())).json()["id"]
    await run(container)
    assert (await doc(client, first))["dedup"]["verdict"] == "similar"
    assert (await doc(client, second))["status"] == "READY"


@pytest.mark.parametrize(("text", "extra"), [(EN, "\n\nOne more paragraph about the weather at sea today."),
                                             (ZH, "\n\n另外一段关于今天海上天气的文字。"),
                                             (KO, "\n\n오늘 바다 날씨에 관한 문단이 하나 더 있다.")])
async def test_near_duplicate_differing_by_a_paragraph(client, container, text, extra) -> None:
    kb = await kb_with(client, "near")
    first = (await upload(client, kb, "v1.md", text.encode())).json()["id"]
    await run(container)
    second = (await upload(client, kb, "v2.md", (text + extra).encode())).json()["id"]
    await run(container)
    old, new = await doc(client, first), await doc(client, second)
    assert old["status"] == "OUTDATED" and old["duplicate_of"] == second
    assert new["status"] == "READY" and new["dedup"]["verdict"] == "similar"
    assert 0.8 <= new["dedup"]["score"] < 1.0 and new["dedup"]["method"] == "minhash"


async def test_near_duplicates_stay_apart_in_exact_mode_and_boilerplate_never_merges(client, container) -> None:
    exact = await make_kb(client, "exact")
    a = (await upload(client, exact, "v1.md", EN.encode())).json()["id"]
    b = (await upload(client, exact, "v2.md", (EN + "\n\nOne more paragraph.").encode())).json()["id"]
    await run(container)
    assert [(await doc(client, x))["status"] for x in (a, b)] == ["READY", "READY"]

    near = await kb_with(client, "near")
    boiler = "Copyright 2026 Example Corp. All rights reserved. Contact support for help. " * 4
    recipe = boiler + "\n\n" + "\n\n".join(f"Recipe step {i}: stir the tomato sauce slowly." for i in range(25))
    network = boiler + "\n\n" + "\n\n".join(f"Network note {i}: the backup schedule failed." for i in range(25))
    c = (await upload(client, near, "recipe.md", recipe.encode())).json()["id"]
    d = (await upload(client, near, "network.md", network.encode())).json()["id"]
    await run(container)
    assert [(await doc(client, x))["status"] for x in (c, d)] == ["READY", "READY"]


async def test_outdated_then_reindex_brings_it_back_for_good(client, container) -> None:
    kb = await make_kb(client)
    first = (await upload(client, kb, "x.md", EN.encode())).json()["id"]
    await run(container)
    second = (await upload(client, kb, "x.md", EN.encode())).json()["id"]
    await run(container)
    assert (await doc(client, first))["status"] == "OUTDATED"
    assert (await client.post(f"/api/documents/{first}/reindex")).status_code == 202
    await run(container)
    back = await doc(client, first)
    assert back["status"] == "READY" and back["duplicate_of"] is None
    assert (await doc(client, second))["status"] == "READY"  # neither outdates the other again


async def test_two_workers_judging_near_duplicates_at_once_leave_exactly_one_ready(client, container) -> None:
    kb = await kb_with(client, "near")
    one = (await upload(client, kb, "one.md", ZH.encode())).json()["id"]
    two = (await upload(client, kb, "two.md", (ZH + "\n\n多一句话。").encode())).json()["id"]
    w1 = container.worker(WorkerConfig(heartbeat_seconds=5), worker_id="w1")
    w2 = container.worker(WorkerConfig(heartbeat_seconds=5), worker_id="w2")
    await asyncio.gather(w1.run_until_idle(), w2.run_until_idle())
    statuses = sorted([(await doc(client, one))["status"], (await doc(client, two))["status"]])
    assert statuses == ["OUTDATED", "READY"]
    assert (await doc(client, one))["status"] == "OUTDATED"  # the older one (uploaded first)


async def test_hash_bands_go_with_the_document(client, container) -> None:
    kb = await kb_with(client, "near")
    d = (await upload(client, kb, "a.md", EN.encode())).json()["id"]
    await run(container)
    count = "SELECT count(*) AS n FROM document_hash_bands WHERE document_id = %s"
    assert (await container.infra.db.fetchone(count, (d,)))["n"] == 32
    await client.delete(f"/api/documents/{d}")
    await run(container)
    assert (await container.infra.db.fetchone(count, (d,)))["n"] == 0
    # and a new upload of the same text is not a duplicate of a deleted document
    again = (await upload(client, kb, "a.md", EN.encode())).json()["id"]
    await run(container)
    assert (await doc(client, again))["status"] == "READY" and (await doc(client, again))["dedup"] == {}
