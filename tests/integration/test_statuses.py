"""GET /api/statuses (the status vocabulary the workbench reads): served to any valid key, refused
without one, and telling the truth: for every status and operation, the API accepts exactly what
the table says and answers 409 for the rest."""

from __future__ import annotations

import httpx

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.domain import operations
from ultimate_rag.domain.auth import Role
from ultimate_rag.domain.operations import DocumentOperation as Op
from ultimate_rag.domain.operations import vocabulary
from ultimate_rag.domain.status import DocumentStatus

from .helpers import new_kb, queue_document


async def test_any_valid_key_reads_the_vocabulary_and_no_key_is_refused(client: httpx.AsyncClient, container) -> None:
    kb = await new_kb(container)
    reader = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={kb: Role.READER})
    for headers in ({}, {"Authorization": f"Bearer {reader}"}):
        r = await client.get("/api/statuses", headers=headers)
        assert r.status_code == 200, r.text
        assert r.json() == vocabulary()
    assert (await client.get("/api/statuses", headers={"Authorization": "Bearer wrong"})).status_code == 401
    body = r.json()
    ready = next(s for s in body["document_statuses"] if s["name"] == "READY")
    assert ready == {"name": "READY", "active": False, "stable": True, "running": False, "working": False,
                     "operations": ["reindex", "upload", "delete", "hard_delete"]}


async def _attempt(client: httpx.AsyncClient, doc: str, op: Op) -> int:
    if op is Op.REINDEX:
        r = await client.post(f"/api/documents/{doc}/reindex")
    elif op is Op.UPLOAD:
        r = await client.put(f"/api/documents/{doc}/content", files={"file": ("new.txt", b"new text", "text/plain")})
    elif op in (Op.DELETE, Op.HARD_DELETE):
        r = await client.delete(f"/api/documents/{doc}", params={"force": str(op is Op.HARD_DELETE).lower()})
    else:
        r = await client.post(f"/api/documents/{doc}/{op.value}")
    assert r.status_code in (200, 202, 409), (op, r.status_code, r.text)
    return r.status_code


async def test_the_api_allows_exactly_the_operations_the_vocabulary_lists(client: httpx.AsyncClient, container) -> None:
    kb = await new_kb(container)
    served = {s["name"]: set(s["operations"]) for s in (await client.get("/api/statuses")).json()["document_statuses"]}
    assert set(served) == {s.value for s in DocumentStatus}
    outcomes = {}
    for status in DocumentStatus:
        for op in Op:  # a fresh document for each: a successful operation changes (or removes) it
            doc = await queue_document(container, kb, f"text for {status} {op}")
            await container.infra.db.execute(
                "UPDATE documents SET status = %s, deleted_at = CASE WHEN %s = 'DELETED' THEN now() END WHERE id = %s",
                (status.value, status.value, doc))
            outcomes[status.value, op.value] = await _attempt(client, str(doc), op) != 409
    assert outcomes == {(s, op.value): op.value in served[s] for s in served for op in Op}


async def test_the_409s_and_the_vocabulary_read_one_table(client: httpx.AsyncClient, container, monkeypatch) -> None:
    """Take an operation out of domain/operations.py's table and both the API's answers and the
    vocabulary it serves follow: the lifecycle decides from that table and from nothing else."""
    kb = await new_kb(container)
    doc = await queue_document(container, kb, "one table")
    await container.infra.db.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (doc,))

    def ready_operations(body: dict) -> list[str]:
        return next(s["operations"] for s in body["document_statuses"] if s["name"] == "READY")

    monkeypatch.setitem(operations._ALLOWED_IN, Op.REINDEX,
                        operations._ALLOWED_IN[Op.REINDEX] - {DocumentStatus.READY})
    assert "reindex" not in ready_operations((await client.get("/api/statuses")).json())
    r = await client.post(f"/api/documents/{doc}/reindex")
    assert r.status_code == 409 and "READY" in r.json()["detail"], r.text
    monkeypatch.undo()
    assert "reindex" in ready_operations((await client.get("/api/statuses")).json())
    assert (await client.post(f"/api/documents/{doc}/reindex")).status_code == 202
