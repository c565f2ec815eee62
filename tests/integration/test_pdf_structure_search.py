"""PDF structure as search sees it, through the whole pipeline and the real local model: a contents
page does not outrank the section it points to (cython.pdf: three of the top five hits for "What
is Cython?" were contents lines), and a table row is found with its column names
(chinese-tables.pdf: "how much of the Bank of Jiangsu line is unused?")."""

from __future__ import annotations

from uuid import uuid4

import httpx

from ultimate_rag.services.job_loop import WorkerConfig

from ..unit.pdf_builders import CREDIT_HEADER, CYTHON_ANSWER, contents_pdf, credit_table_pdf


async def _search(client: httpx.AsyncClient, kb: str, query: str) -> list[dict]:
    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": query, "top_k": 5})
    assert r.status_code == 200, r.text
    return list(r.json()["results"])


async def test_contents_lines_do_not_outrank_sections_and_table_rows_keep_their_columns(
        client: httpx.AsyncClient, container) -> None:
    kb = (await client.post("/api/knowledge-bases", json={"name": f"kb-{uuid4().hex[:6]}"})).json()["id"]
    ids = []
    for name, data in (("cython.pdf", contents_pdf()[0]), ("credit.pdf", credit_table_pdf()[0])):
        r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, data, "application/pdf")})
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    await container.worker(WorkerConfig(heartbeat_seconds=5)).run_until_idle()
    docs = [(await client.get(f"/api/documents/{i}")).json() for i in ids]
    assert [d["status"] for d in docs] == ["READY", "READY"], docs

    hits = await _search(client, kb, "What is Cython?")
    loc = hits[0]["locator"]  # the section the contents line points to (its answer, or its examples)
    assert hits[0]["filename"] == "cython.pdf" and hits[0]["heading_path"][-1] == "1.1 What is Cython?"
    assert loc.get("page") == 3 or loc["page_start"] <= 3 <= loc["page_end"]  # with the title page, maybe
    assert any(CYTHON_ANSWER[:60] in h["content"] for h in hits[:3])
    cython = [h for h in hits if h["filename"] == "cython.pdf"]
    assert all(h["locator"].get("page") != 2 and ". . ." not in h["content"] for h in cython), cython
    assert all("Contents" not in h["heading_path"] for h in cython)  # the contents title heads nothing
    assert not any("Release 0.29a0" in h["content"] for h in cython)  # the running header is not embedded

    hits = await _search(client, kb, "江苏银行的授信剩余额度是多少？")
    top = hits[0]
    assert top["filename"] == "credit.pdf"
    assert "| " + " | ".join(CREDIT_HEADER) + " |" in top["content"]
    assert "| 8 | 江苏银行 | 218,597.00 | 218,597.00 | 0.00 |" in top["content"]
    loc = top["locator"]  # the table counts its header as row 1: 江苏银行 is row 9 of table 1
    assert loc["page"] == 1 and loc["table"] == 1 and loc["row_start"] <= 9 <= loc["row_end"]
