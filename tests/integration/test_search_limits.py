"""One reader cannot slow everyone down (docs/security.md, "Search requests"), on the real pool and
the real database: hostile searches from one key leave connections for every other knowledge base
(at most ``max_searches_per_key`` at once, then 429 with Retry-After); a statement that runs past
the API's statement timeout is cancelled by the server; highlighting a long query over many
results runs off the event loop, so other requests are answered meanwhile."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from uuid import UUID

import httpx
import pytest

from ultimate_rag import offload
from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.adapters.postgres.database import Database
from ultimate_rag.api.app import create_app
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.auth import Role
from ultimate_rag.domain.errors import StatementTimeoutError
from ultimate_rag.services.failures import explain
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.services.search import SearchService
from ultimate_rag.settings import Settings
from ultimate_rag.testing.eventually import eventually

from ..conftest import ADMIN_KEY

HOSTILE = "?" * 16 + "[a]*" * 16  # the worst the limits allow: 32 one-character wildcards, 16 stars


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, max_searches_per_key=2,
                    max_upload_bytes=1_000_000)


@pytest.fixture
async def small_pool(settings: Settings, embedder):
    """The API's shape with a small pool: four connections, a two-second wait for one (then 503)."""
    c = build(settings, url=settings.database_url, embedder=embedder, pool_size=4, acquire_timeout=2.0,
              statement_timeout=20.0)
    await c.open()
    yield c
    await c.close()


async def ready_kb(http: httpx.AsyncClient, container, name: str, text: bytes) -> str:
    kb = (await http.post("/api/knowledge-bases", json={"name": name})).json()["id"]
    await http.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (f"{name}.txt", text)})
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    return str(kb)


async def test_one_keys_hostile_searches_leave_the_pool_to_others(small_pool) -> None:
    app = create_app(container=small_pool)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=120,
                                 headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
        a = await ready_kb(http, small_pool, "a", b"Tides and turbines of the northern coast.")
        b = await ready_kb(http, small_pool, "b", b"The ferry timetable of the island.")
        # many documents with long names: the glob has work to do on every one of them
        await small_pool.infra.db.execute(
            "INSERT INTO documents (id, knowledge_base_id, filename, mime_type, size_bytes, sha256, object_key,"
            " status, stage_timings) SELECT gen_random_uuid(), %s, repeat('a', 230) || i || '.txt', 'text/plain', 1,"
            " 'x', 'k' || i, 'PENDING', '{}'::jsonb FROM generate_series(1, 3000) i", (UUID(a),))
        keys = ApiKeyRepository(small_pool.infra.db)
        hostile = await keys.create(is_admin=False, scopes={UUID(a): Role.READER})
        other = await keys.create(is_admin=False, scopes={UUID(b): Role.READER})

        async def search(key: str, kb: str, body: dict) -> httpx.Response:
            return await http.post(f"/api/knowledge-bases/{kb}/search", json=body,
                                   headers={"Authorization": f"Bearer {key}"})

        flood = [asyncio.create_task(search(hostile, a, {"query": "tides", "top_k": 100,
                                                         "filters": {"filename": HOSTILE}})) for _ in range(14)]
        answered = await search(other, b, {"query": "ferry"})
        done = await asyncio.gather(*flood)
    assert answered.status_code == 200 and answered.json()["results"]
    statuses = sorted(r.status_code for r in done)
    assert set(statuses) <= {200, 429}, [(r.status_code, r.text) for r in done if r.status_code not in (200, 429)]
    refused = [r for r in done if r.status_code == 429]
    assert refused and all(r.headers["retry-after"] == "1" and "searches" in r.json()["detail"] for r in refused)


async def test_a_statement_past_the_timeout_is_cancelled(settings: Settings) -> None:
    db = Database(settings.database_url or "", max_size=1, statement_timeout=0.2)  # as the API's pool is made
    await db.open()
    try:
        with pytest.raises(StatementTimeoutError) as caught:
            await db.fetchone("SELECT pg_sleep(30)")
        assert explain(caught.value).reason == "the database failed (statement timeout)"
        assert await db.ping()  # the connection is fine afterwards
    finally:
        await db.close()


async def test_highlighting_runs_off_the_event_loop(client: httpx.AsyncClient, container, monkeypatch) -> None:
    """While a search ranks and highlights its results for a long query, another request
    is answered: the heavy part waits (in its thread) until that request is done, which it could
    never be if the heavy part held the event loop. (Results' text above ``offload.SMALL_WORK``
    characters goes to a thread; the threshold is lowered here so a small knowledge base is enough.)"""
    monkeypatch.setattr(offload, "SMALL_WORK", 100)
    text = "".join(f"第{i}段讲述港口的潮汐、渡轮时刻表与灯塔的历史，以及北方海岸的风力涡轮机。" for i in range(40))
    kb = (await client.post("/api/knowledge-bases", json={"name": "long"})).json()["id"]
    await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("long.txt", text.encode())})
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    loop_thread = threading.get_ident()
    other_done = threading.Event()
    ran_on: list[int] = []
    rank = SearchService._rank

    def spied(self, *args, **kwargs):  # the real ranking, held until the other request was answered
        ran_on.append(threading.get_ident())
        if threading.get_ident() != loop_thread:
            assert other_done.wait(60), "the other request was not answered while the search worked"
        return rank(self, *args, **kwargs)

    monkeypatch.setattr(SearchService, "_rank", spied)
    # long enough to be many terms; the 4,000-character case of the highlight rule itself is in
    # tests/unit/test_search_bounds.py (embedding such a query costs seconds of the model's time)
    query = "港口潮汐渡轮时刻表灯塔历史北方海岸风力涡轮机" * 10
    heavy = asyncio.create_task(client.post(f"/api/knowledge-bases/{kb}/search", json={"query": query, "top_k": 5}))
    await eventually(lambda: ran_on, what="the search reached its heavy part")
    assert (await client.get("/healthz")).status_code == 200
    other_done.set()
    r = await heavy
    assert r.status_code == 200 and r.json()["results"]
    assert r.json()["results"][0]["highlights"]
    assert all(t != loop_thread for t in ran_on)
