"""``GET /api/documents/{id}/snapshot`` streams the snapshot in blocks (docs/security.md, "Assets
and downloads"): a large one never sits whole in the API's memory, and a snapshot replaced while it
is read is still read whole."""

from __future__ import annotations

import json

import httpx

from .helpers import new_kb, queue_document


async def test_the_snapshot_is_sent_in_blocks(client: httpx.AsyncClient, container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "some text")
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))
    chunks = [{"ordinal": i, "content": f"chunk {i} " + "x" * 1000} for i in range(3000)]  # about 3 MiB
    await container.infra.snapshots.save(knowledge_base_id=kb, document_id=doc, snapshot={"chunks": chunks})
    store = container.infra.snapshots
    opened, blocks = store.open_blocks, []

    async def spied(*args, **kwargs):  # the real store, its blocks counted as the route reads them
        source = await opened(*args, **kwargs)

        async def counted():
            async for block in source:
                blocks.append(len(block))
                yield block
        return counted()

    store.open_blocks = spied
    try:
        r = await client.get(f"/api/documents/{doc}/snapshot")
    finally:
        del store.open_blocks
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert json.loads(r.content)["chunks"] == chunks
    assert len(blocks) >= 3 and max(blocks) <= 1 << 20 and sum(blocks) == len(r.content)

    # a snapshot replaced after it was opened: the reader gets the one it opened, whole
    source = await store.open_blocks(kb, doc)
    await container.infra.snapshots.save(knowledge_base_id=kb, document_id=doc, snapshot={"chunks": []})
    old = b"".join([block async for block in source])
    assert json.loads(old)["chunks"] == chunks
    assert json.loads((await client.get(f"/api/documents/{doc}/snapshot")).content) == {"chunks": []}


async def test_a_missing_snapshot_is_404(client: httpx.AsyncClient, container) -> None:
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "some text")
    r = await client.get(f"/api/documents/{doc}/snapshot")
    assert r.status_code == 404 and r.json() == {"detail": "this document has no chunk snapshot yet"}
