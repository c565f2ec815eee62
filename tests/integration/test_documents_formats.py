"""Real documents through the API and the worker: PDF (English, Chinese, Korean, an image), DOCX,
HTML and CSV reach READY with their structure; images are stored as assets, served back
byte-identical, linked from search results, replaced on re-upload and removed with the document;
every hostile input ends as a 4xx or FAILED with its reason while a normal document uploaded at
the same time reaches READY; the optional vision step describes images."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pymupdf
import pytest

from ultimate_rag.adapter_factories import make_vision
from ultimate_rag.adapters.parsers.pdf import PdfParser
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing.eventually import eventually

from ..conftest import ADMIN_KEY
from ..unit.test_format_parsers import (
    CHINESE,
    ENGLISH,
    HTML_PAGE,
    KOREAN,
    huge_image_pdf,
    jpeg,
    make_docx,
    make_pdf,
    png,
)


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    """The suite's settings with room for the 50 MB text file and small parse limits to hit."""
    return Settings(
        database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
        retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=60 * 1024 * 1024,
        parse_max_pages=500, parse_max_image_pixels=20_000_000, parse_max_archive_bytes=8 * 1024 * 1024,
        parse_timeout_seconds=60, parse_memory_limit_mb=1536,
    )


async def make_kb(client: httpx.AsyncClient) -> str:
    r = await client.post("/api/knowledge-bases", json={"name": "formats"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def upload(client: httpx.AsyncClient, kb: str, name: str, data: bytes) -> httpx.Response:
    return await client.post(f"/api/knowledge-bases/{kb}/documents",
                             files={"file": (name, data, "application/octet-stream")})


async def run_worker(container) -> None:
    worker = container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01))

    async def pending() -> int:
        await worker.run_until_idle()
        row = await container.infra.db.fetchone("SELECT count(*) AS n FROM ingestion_jobs WHERE status = 'PENDING'")
        return int(row["n"])

    await eventually(pending, lambda n: n == 0, what="jobs still pending")


async def document(client: httpx.AsyncClient, doc_id: str) -> dict:
    r = await client.get(f"/api/documents/{doc_id}")
    assert r.status_code == 200
    return r.json()


async def chunks(client: httpx.AsyncClient, doc_id: str) -> list[dict]:
    """Every chunk, page after page."""
    items: list[dict] = []
    params: dict[str, str] = {"limit": "500"}
    while True:
        page = (await client.get(f"/api/documents/{doc_id}/chunks", params=params)).json()
        items += page["items"]
        if not page["next_cursor"]:
            return items
        params["cursor"] = page["next_cursor"]


async def test_pdf_with_images_is_searchable_by_page_and_links_its_image(client, container) -> None:
    kb = await make_kb(client)
    picture = jpeg(64, 48)
    r = await upload(client, kb, "timetable.pdf", make_pdf(image=picture))
    assert r.status_code == 202, r.text
    doc_id = r.json()["id"]
    await run_worker(container)
    doc = await document(client, doc_id)
    assert doc["status"] == "READY", doc
    assert doc["parser"] == {"name": "pdf", "version": PdfParser.version}

    items = await chunks(client, doc_id)
    assert all(c["locator"].get("page") in (1, 2) for c in items)
    joined = "\n".join(c["content"] for c in items)
    for text in (ENGLISH, CHINESE, KOREAN, "Figure 1: Map of the harbour piers"):
        assert text in joined
    assert ("Ferry Timetable",) in {tuple(c["heading_path"]) for c in items}

    assets = await container.ingest.documents.assets(doc_id)
    assert len(assets) == 1 and assets[0].page == 1 and assets[0].mime_type == "image/jpeg"
    assert await container.infra.storage.get(assets[0].object_key) == picture

    snapshot = json.loads((await client.get(f"/api/documents/{doc_id}/snapshot")).content)
    assert snapshot["parser"] == {"name": "pdf", "version": PdfParser.version}

    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "map of the harbour piers", "top_k": 3})
    hit = r.json()["results"][0]
    assert hit["locator"]["page"] == 1 and hit["filename"] == "timetable.pdf"
    link = hit["assets"][0]
    assert link["id"] == str(assets[0].id) and link["page"] == 1
    assert link["url"] == f"/api/documents/{doc_id}/assets/{assets[0].id}"
    assert link["description"] == "Figure 1: Map of the harbour piers"
    served = await client.get(link["url"])
    assert served.status_code == 200 and served.content == picture
    assert served.headers["content-type"] == "image/jpeg"

    r = await client.post(f"/api/knowledge-bases/{kb}/search", json={"query": "港口渡轮码头", "top_k": 3})
    assert any(CHINESE in h["content"] and h["locator"]["page"] == 1 for h in r.json()["results"])


async def test_assets_are_replaced_on_reupload_and_removed_with_the_document(client, container) -> None:
    kb = await make_kb(client)
    doc_id = (await upload(client, kb, "timetable.pdf", make_pdf(image=png()))).json()["id"]
    await run_worker(container)
    old = await container.ingest.documents.assets(doc_id)
    assert len(old) == 1 and await container.infra.storage.exists(old[0].object_key)

    r = await client.put(f"/api/documents/{doc_id}/content",
                         files={"file": ("timetable.pdf", make_pdf(), "application/pdf")})
    assert r.status_code == 202, r.text
    await run_worker(container)
    assert (await document(client, doc_id))["status"] == "READY"
    assert await container.ingest.documents.assets(doc_id) == []
    assert not await container.infra.storage.exists(old[0].object_key)
    assert (await client.get(f"/api/documents/{doc_id}/assets/{old[0].id}")).status_code == 404

    r = await client.put(f"/api/documents/{doc_id}/content",
                         files={"file": ("timetable.pdf", make_pdf(image=png()), "application/pdf")})
    await run_worker(container)
    again = await container.ingest.documents.assets(doc_id)
    # the same locator in a new revision: a new id and key, stored beside the published revision's
    assert [a.locator_key for a in again] == [old[0].locator_key] and again[0].id != old[0].id
    r = await client.delete(f"/api/documents/{doc_id}", params={"force": "true"})
    assert r.status_code == 202, r.text
    await run_worker(container)
    assert not await container.infra.storage.exists(again[0].object_key)


async def test_docx_html_and_csv_reach_ready_with_their_structure(client, container) -> None:
    kb = await make_kb(client)
    picture = png()
    rows = "\n".join(f"{i},Pier {i % 4},Leaves at {i % 24:02d}:15 towards the island" for i in range(120))
    ids = {}
    for name, data in [("manual.docx", make_docx(picture)), ("news.html", HTML_PAGE.encode()),
                       ("times.csv", ("id,pier,note\n" + rows).encode()), ("times.tsv", b"a\tb\n1\t2\n")]:
        r = await upload(client, kb, name, data)
        assert r.status_code == 202, (name, r.text)
        ids[name] = r.json()["id"]
    await run_worker(container)
    for name, doc_id in ids.items():
        doc = await document(client, doc_id)
        assert doc["status"] == "READY", (name, doc)

    docx_chunks = await chunks(client, ids["manual.docx"])
    assert ("Operations Manual", "Schedules") in {tuple(c["heading_path"]) for c in docx_chunks}
    table = next(c for c in docx_chunks if "| Four | 06:00 |" in c["content"])
    assert "| Pier | Departure |" in table["content"]
    linked = [c for c in docx_chunks if c["metadata"].get("assets")]
    assert linked and "A red square logo" in linked[0]["content"]
    served = await client.get(linked[0]["metadata"]["assets"][0]["url"])
    assert served.content == picture

    html_chunks = await chunks(client, ids["news.html"])
    text = "\n".join(c["content"] for c in html_chunks)
    assert "The new pier opens in May." in text and "Copyright" not in text and "About us" not in text
    assert ("Harbour update", "Timetable") in {tuple(c["heading_path"]) for c in html_chunks}

    csv_chunks = await chunks(client, ids["times.csv"])
    assert len(csv_chunks) > 1
    assert all(c["content"].startswith("| id | pier | note |\n|---|---|---|\n") for c in csv_chunks)
    from itertools import pairwise

    # Each chunk cites its own rows (1-based, header not counted) and their file lines.
    cited = [(c["locator"]["row_start"], c["locator"]["row_end"]) for c in csv_chunks]
    assert cited[0][0] == 1 and cited[-1][1] == 120
    assert all(b[0] == a[1] + 1 for a, b in pairwise(cited))
    assert all(c["locator"]["line_start"] == c["locator"]["row_start"] + 1 for c in csv_chunks)


def _zip_bomb() -> bytes:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("word/document.xml", b"\0" * (64 * 1024 * 1024))
    return out.getvalue()


def _entity_docx() -> bytes:
    import io
    import zipfile

    real = zipfile.ZipFile(io.BytesIO(make_docx()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in real.namelist():
            data = real.read(name)
            if name == "word/document.xml":
                data = data.replace(b"?>", b'?><!DOCTYPE d [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>', 1)
            archive.writestr(name, data)
    return out.getvalue()


def _many_pages(pages: int) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page(width=200, height=200).insert_text((20, 40), f"page {n + 1}")
    return doc.tobytes()


async def test_hostile_inputs_fail_with_reasons_while_a_normal_document_gets_ready(client, container) -> None:
    import random

    kb = await make_kb(client)
    pdf = make_pdf()
    refused = {  # answered at upload: 4xx, nothing stored
        "lying.txt": (pdf, 415, "application/pdf"),
        "garbage.txt": (random.Random(7).randbytes(4096), 415, "binary data"),
        "photo.pdf": (png(), 415, "image/png"),
        "empty.pdf": (b"%PDF-1.7\n%binary\n", 422, "the PDF is damaged"),  # a PDF we read, but not this one
    }
    for name, (data, code, reason) in refused.items():
        r = await upload(client, kb, name, data)
        assert r.status_code == code and reason in r.json()["detail"], (name, r.text)

    failing = {  # accepted, then FAILED by the worker with a reason
        "corrupt.pdf": (b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog" + bytes(range(256)) * 16, "corrupt or truncated"),
        "truncated.pdf": (pdf[:200], "corrupt or truncated"),
        "locked.pdf": (pymupdf.open(stream=pdf, filetype="pdf").tobytes(
            encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o", user_pw="u"), "encrypted with a password"),  # type: ignore[attr-defined]  # PyMuPDF's constants are untyped
        "bomb.docx": (_zip_bomb(), "zip bomb"),
        "entities.docx": (_entity_docx(), "XML entity expansion"),
        "thousand.pdf": (_many_pages(1000), "has 1000 pages, more than the limit of 500"),
        "deep.html": (("<html><body>" + "<div>" * 3000 + "x" + "</div>" * 3000 + "</body></html>").encode(),
                      "more than the limit of 200"),
        "empty.txt": (b"", "no text to index"),
        "one-line.txt": (b"a" * (50 * 1024 * 1024), "more than the limit of 20000000"),
    }
    ids = {}
    for name, (data, _) in failing.items():
        r = await upload(client, kb, name, data)
        assert r.status_code == 202, (name, r.text)
        ids[name] = r.json()["id"]
    normal = (await upload(client, kb, "normal.pdf", make_pdf(image=png()))).json()["id"]
    # a limit on one image never fails the document: the image is left out, the text indexed
    huge = (await upload(client, kb, "huge-image.pdf", huge_image_pdf())).json()["id"]
    await run_worker(container)

    assert (await document(client, normal))["status"] == "READY"
    huge_doc = await document(client, huge)
    assert huge_doc["status"] == "READY" and huge_doc["chunk_count"] > 0, huge_doc
    assert huge_doc["warnings"] == ["an image on page 1 (40000×40000 pixels) was left out: it is 40000×40000 "
                                    "pixels, too large to downscale (more than 4 times the limit of 20000000 pixels)"]
    for name, (_, reason) in failing.items():
        doc = await document(client, ids[name])
        assert doc["status"] == "FAILED", (name, doc)
        assert reason in doc["error_message"], (name, doc["error_message"])
        assert doc["attempts"] == 1, name  # permanent: never retried


class _CannedChat(BaseHTTPRequestHandler):
    """A fake of a remote vision LLM: an OpenAI-compatible /chat/completions endpoint on
    127.0.0.1 that returns a canned description (or an error when told to)."""

    status = 200
    requests: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.end_headers()
            return
        reply = json.dumps({"choices": [{"message": {"role": "assistant",
                                                     "content": "A blue rectangle marking the ferry terminal."}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(reply.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def vision_server() -> Iterator[str]:
    _CannedChat.status, _CannedChat.requests = 200, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CannedChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_vision_descriptions_go_into_the_asset_and_the_chunk(client, container, vision_server) -> None:
    container.ingest.processor._vision = make_vision(container.settings.model_copy(update={
        "vision_base_url": vision_server, "vision_model": "tiny-vision", "vision_api_key": "k-123"}))
    kb = await make_kb(client)
    picture = jpeg()
    doc_id = (await upload(client, kb, "timetable.pdf", make_pdf(image=picture))).json()["id"]
    await run_worker(container)
    assert (await document(client, doc_id))["status"] == "READY"
    sent = _CannedChat.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer k-123"
    assert sent["body"]["model"] == "tiny-vision"
    image_part = sent["body"]["messages"][0]["content"][1]
    assert image_part["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assets = await container.ingest.documents.assets(doc_id)
    assert assets[0].description == "A blue rectangle marking the ferry terminal."
    linked = [c for c in await chunks(client, doc_id) if c["metadata"].get("assets")]
    assert "[Image on page 1: A blue rectangle marking the ferry terminal.]" in linked[0]["content"]


async def test_a_failing_vision_call_is_retried_as_transient(client, container, vision_server) -> None:
    _CannedChat.status = 503
    container.ingest.processor._vision = make_vision(container.settings.model_copy(update={
        "vision_base_url": vision_server, "vision_model": "tiny-vision"}))
    kb = await make_kb(client)
    doc_id = (await upload(client, kb, "timetable.pdf", make_pdf(image=png()))).json()["id"]
    await container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01)).run_until_idle(max_jobs=1)
    doc = await document(client, doc_id)
    assert doc["status"] == "PENDING"
    # a provider's 503 is an outage: the attempt is given back, not spent
    assert doc["error_message"] == ("attempt 1 was interrupted because the vision model failed (HTTP 503); "
                                    "this does not count as a failed attempt, retrying automatically in 0 s")
    _CannedChat.status = 200
    await run_worker(container)
    assert (await document(client, doc_id))["status"] == "READY"


async def test_a_document_is_never_ready_while_an_asset_could_not_be_stored(client, container) -> None:
    storage = container.ingest.processor._storage
    real_put = storage.put
    failures = {"left": 1}

    async def flaky_put(key: str, data: bytes, content_type: str) -> None:  # fault injection on the real storage
        if "/assets/" in key and failures["left"]:
            failures["left"] -= 1
            raise OSError("disk full")
        await real_put(key, data, content_type)

    storage.put = flaky_put
    try:
        kb = await make_kb(client)
        picture = png()
        doc_id = (await upload(client, kb, "timetable.pdf", make_pdf(image=picture))).json()["id"]
        await container.worker(WorkerConfig(heartbeat_seconds=5, retry_delay_seconds=0.01)).run_until_idle(max_jobs=1)
        doc = await document(client, doc_id)
        # the raw OSError text goes to the log; the document says what kind of failure it was
        assert doc["status"] == "PENDING" and "a storage or network operation failed" in doc["error_message"]
        assert await chunks(client, doc_id) == []
        await run_worker(container)
        assert (await document(client, doc_id))["status"] == "READY"
        [asset] = await container.ingest.documents.assets(doc_id)
        assert await container.infra.storage.exists(asset.object_key)
    finally:
        storage.put = real_put
