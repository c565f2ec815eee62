"""Shared pieces of the answer tests: the stand-in chat server (a process speaking the OpenAI chat
protocol that is NOT a model — the real one is in test_answers_real_model.py), settings that point
at it, the API served by a real uvicorn (answers stream: an in-memory transport would buffer them),
a small knowledge base (a PDF with pages and an image, a Markdown manual) and an SSE reader."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing.eventually import eventually
from ultimate_rag.testing.llm_servers import StandInChatServer

from ..conftest import ADMIN_KEY
from ..unit.test_format_parsers import jpeg, make_pdf

PROVIDER_KEY = "sk-provider-secret-7f3a9c51e0"
MANUAL = (b"# Router manual\n\nThe manual of the home router.\n\n## Reset\n\nTo reset the router, hold the power "
          b"button for ten seconds until the light blinks orange.\n")


@pytest.fixture(scope="session")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInChatServer]:
    server = StandInChatServer(tmp_path_factory.mktemp("standin")).start()
    yield server
    server.stop()


def with_llm(settings: Settings, base_url: str, **more: Any) -> Settings:
    return settings.model_copy(update={"llm_base_url": base_url, "llm_model": "stand-in", "llm_api_key": PROVIDER_KEY,
                                       "llm_timeout_seconds": 1.0, "llm_max_retries": 2,
                                       "llm_max_retry_wait_seconds": 2.0, **more})


@contextlib.asynccontextmanager
async def serve(container: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The app on a loopback port, and an admin client of it."""
    from ultimate_rag.api.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(create_app(container=container), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    await eventually(lambda: server.started, what="the server started")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60,
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
            yield client
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=40)


async def ingest(client: httpx.AsyncClient, container: Any, files: tuple[str, ...] = ("ferry.pdf", "router.md"),
                 name: str = "answers") -> dict[str, str]:
    """A knowledge base with ferry.pdf (page 1: timetable in English, Chinese and Korean, a map
    image; page 2: night service) and router.md, processed to READY by a real worker."""
    kb = (await client.post("/api/knowledge-bases", json={"name": name})).json()["id"]
    ids = {"kb": kb}
    data = {"ferry.pdf": make_pdf(image=jpeg(64, 48)), "router.md": MANUAL}
    for filename in files:
        r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (filename, data[filename])})
        assert r.status_code == 202, r.text
        ids[filename] = r.json()["id"]
    worker = container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01))
    await worker.run_until_idle()
    for filename in files:
        assert (await client.get(f"/api/documents/{ids[filename]}")).json()["status"] == "READY"
    return ids


async def read_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """(event, data) of a server-sent event stream, as they arrive."""
    event, data = "message", ""
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif line == "" and data:
            yield event, json.loads(data)
            event, data = "message", ""


async def stream_answer(client: httpx.AsyncClient, kb: str, body: dict[str, Any],
                        headers: dict[str, str] | None = None) -> list[tuple[str, Any]]:
    async with client.stream("POST", f"/api/knowledge-bases/{kb}/answer", json={**body, "stream": True},
                             headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [frame async for frame in read_events(response)]


def prompt_of(request: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in request["body"]["messages"])
