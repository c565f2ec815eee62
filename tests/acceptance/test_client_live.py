"""The Python client (``ultimate_rag.client``) against a real running server: typed results, the
API's errors with the server's message, retries on 429/503, pagination, uploads with progress and
``wait_until_ready`` over the event stream."""

from __future__ import annotations

import itertools
import uuid

import pytest

from ultimate_rag.client import (
    AsyncClient,
    AuthenticationFailed,
    Client,
    Conflict,
    Document,
    NotFound,
    PermissionDenied,
    RetryPolicy,
    ServiceUnavailable,
    UnsupportedFormat,
)
from ultimate_rag.testing.servers import Fault, FaultProxy

pytestmark = pytest.mark.acceptance


def test_errors_carry_the_servers_message(live) -> None:
    kb = live.new_kb("errors")
    with Client(live.url, live.admin_key) as rag:
        with pytest.raises(NotFound) as missing:
            rag.get_document(uuid.uuid4())
        assert missing.value.status_code == 404 and str(missing.value) == "document not found"
        with pytest.raises(Conflict, match="already exists"):
            rag.create_knowledge_base(kb["name"])
        with pytest.raises(UnsupportedFormat) as unsupported:
            rag.upload(kb["id"], b"\x00\x01\x02\xff" * 64, filename="blob.bin")
        assert unsupported.value.detail and unsupported.value.status_code == 415
    with Client(live.url, "urk_not_a_key") as stranger, pytest.raises(AuthenticationFailed, match="invalid API key"):
        stranger.list_knowledge_bases()
    with Client(live.url, live.key(kb["id"], "reader")) as reader:
        assert [k.name for k in reader.list_knowledge_bases()] == [kb["name"]]
        with pytest.raises(PermissionDenied, match="may not modify"):
            reader.upload(kb["id"], b"# no\n", filename="no.md")


def test_429_and_503_are_retried_honouring_retry_after(live) -> None:
    proxy = FaultProxy(live.url).start()
    try:
        proxy.inject(Fault(status=429, retry_after="0"), Fault(status=503, retry_after="0"))
        with Client(proxy.url, live.admin_key, retry=RetryPolicy(retries=3, backoff_seconds=0.01)) as rag:
            assert isinstance(rag.list_knowledge_bases(), list)
        assert proxy.faulted == 2 and proxy.requests == 3
        proxy.clear()
        proxy.inject(*(Fault(status=503, retry_after="0", body='{"detail": "the database is restarting"}'),) * 2)
        with Client(proxy.url, live.admin_key, retry=RetryPolicy(retries=1)) as rag, \
                pytest.raises(ServiceUnavailable, match="the database is restarting"):
            rag.list_knowledge_bases()
    finally:
        proxy.stop()


def test_pagination_progress_and_waiting_for_ready(live, tmp_path) -> None:
    kb = live.new_kb("pages")
    path = tmp_path / "big.md"
    path.write_text("# Big\n\n" + "A line about lighthouses and the sea.\n" * 3000)
    seen: list[tuple[int, int]] = []
    with Client(live.url, live.admin_key) as rag:
        docs = [rag.upload(kb["id"], f"# Note {i}\n\nNote number {i} is about topic {i}.".encode(),
                           filename=f"note-{i}.md") for i in range(4)]
        docs.append(rag.upload(kb["id"], path, progress=lambda sent, total: seen.append((sent, total))))
        assert all(isinstance(d, Document) and d.status in ("PENDING", "PARSING") for d in docs)
        assert seen and seen[-1] == (path.stat().st_size, path.stat().st_size)
        assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))

        changes: list[str] = []
        ready = rag.wait_until_ready([d.id for d in docs], timeout=300, poll_interval=3600,
                                     on_update=lambda d: changes.append(d.status))
        assert [d.id for d in ready] == [d.id for d in docs]
        assert {d.status for d in ready} == {"READY"}, [(d.filename, d.status, d.error_message) for d in ready]
        assert changes[-1] == "READY"

        first = rag.list_documents(kb["id"], limit=2)
        assert len(first.items) == 2 and first.next_cursor and first.counts.get("READY") == 5
        listed = list(rag.iter_documents(kb["id"], page_size=2))
        assert sorted(d.id for d in listed) == sorted(d.id for d in docs)

        chunks = list(rag.iter_chunks(docs[-1].id, page_size=2))
        assert len(chunks) == ready[-1].chunk_count > 2
        assert [c.ordinal for c in chunks] == sorted(c.ordinal for c in chunks)

        hits = rag.search(kb["id"], "lighthouses and the sea", top_k=3)
        assert hits[0].document_id == docs[-1].id and hits[0].citation.filename == "big.md"


async def test_the_async_client_does_the_same(live) -> None:
    kb = live.new_kb("async")
    async with AsyncClient(live.url, live.admin_key) as rag:
        doc = await rag.upload(kb["id"], "# 한국어\n\n비동기 클라이언트 문서입니다.".encode(), filename="ko.md")
        # with polling an hour apart, only the event stream can bring READY within the timeout
        [done] = await rag.wait_until_ready([doc.id], timeout=300, poll_interval=3600)
        assert done.status == "READY" and done.chunk_count >= 1
        assert [d.id async for d in rag.iter_documents(kb["id"], page_size=1)] == [doc.id]
        hits = await rag.search(kb["id"], "비동기 클라이언트")
        assert hits and hits[0].document_id == doc.id
        with pytest.raises(NotFound):
            await rag.get_knowledge_base(uuid.uuid4())
