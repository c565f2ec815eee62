"""Assets and downloads over HTTP on the real app, the worker and PostgreSQL: each attack that
stored a script and served it back (an HTML part in a DOCX, an SVG ``data:`` image, an HTML page
uploaded as ``image/svg+xml``) now ends with nothing executable served inline; an oversized image
no longer fails its document; an inline PDF image becomes an asset; downloads stream."""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from PIL import Image

from ultimate_rag.domain.models import DocumentAsset
from ultimate_rag.settings import Settings

from ..conftest import ADMIN_KEY
from ..unit.test_assets import HTML, SVG, inline_image_pdf
from ..unit.test_format_parsers import ENGLISH, make_docx, make_pdf, png
from .test_documents_formats import chunks, document, make_kb, run_worker

SAFE = {"x-content-type-options": "nosniff", "content-security-policy": "default-src 'none'; sandbox"}


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    """The suite's settings with a small pixel limit for one image, so a test PDF can exceed it."""
    return Settings(database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
                    retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=8_000_000,
                    parse_max_image_pixels=200_000, parse_timeout_seconds=60)


async def ingest(client, container, kb: str, name: str, data: bytes,
                 content_type: str = "application/octet-stream") -> dict:
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": (name, data, content_type)})
    assert r.status_code == 202, r.text
    await run_worker(container)
    return await document(client, r.json()["id"])


def assert_safe(response, inline: bool) -> None:
    for header, value in SAFE.items():
        assert response.headers[header] == value
    assert response.headers["content-disposition"].startswith("inline;" if inline else "attachment;")


async def test_docx_image_part_declared_html_is_never_an_asset(client, container) -> None:
    base = make_docx(png())
    original = zipfile.ZipFile(io.BytesIO(base))
    media = next(n for n in original.namelist() if n.startswith("word/media/"))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in original.namelist():
            data = original.read(name)
            if name == "[Content_Types].xml":
                data = data.replace(b'ContentType="image/png"', b'ContentType="text/html"')
            archive.writestr(name, HTML if name == media else data)
    doc = await ingest(client, container, await make_kb(client), "xss.docx", out.getvalue())
    assert doc["status"] == "READY", doc
    assert await container.ingest.documents.assets(UUID(doc["id"])) == []
    assert doc["warnings"] == [f"the image {media} was left out: it is not an image in an allowed raster "
                               "format (PNG, JPEG, GIF, WebP, BMP, TIFF)"]


async def test_svg_data_image_is_left_out_and_a_raster_one_is_served_inline_safely(client, container) -> None:
    def img(mime: str, data: bytes) -> str:
        return f'<img alt="pic" src="data:{mime};base64,{base64.b64encode(data).decode()}">'

    page = f"<html><body><p>{ENGLISH}</p>{img('image/svg+xml', SVG)}{img('image/svg+xml', png())}</body></html>"
    doc = await ingest(client, container, await make_kb(client), "page.html", page.encode())
    assert doc["status"] == "READY", doc
    assert doc["warnings"] == ["a data: image (image/svg+xml) was left out: it is not an image in an allowed "
                               "raster format (PNG, JPEG, GIF, WebP, BMP, TIFF)"]
    [asset] = await container.ingest.documents.assets(UUID(doc["id"]))
    assert asset.mime_type == "image/png"  # what the bytes are, not what the page declared
    served = await client.get(f"/api/documents/{doc['id']}/assets/{asset.id}")
    assert served.status_code == 200 and served.content == png()
    assert served.headers["content-type"] == "image/png"
    assert_safe(served, inline=True)


async def test_an_asset_stored_as_html_or_svg_is_only_ever_an_attachment(client, container) -> None:
    """Defence in depth for assets stored before the gate existed: whatever their recorded type,
    only allow-listed raster types are served inline."""
    doc = await ingest(client, container, await make_kb(client), "note.md", b"# Note\n\nSome text.")
    doc_id, kb_id = UUID(doc["id"]), UUID(doc["knowledge_base_id"])
    for mime, data in (("image/svg+xml", SVG), ("text/html", HTML)):
        ident = uuid4()
        key = f"{kb_id}/{doc_id}/assets/{ident}.bin"
        await container.infra.storage.put(key, data, mime)
        async with container.infra.db.transaction() as conn:
            from ultimate_rag.adapters.postgres.pipeline import replace_asset_rows

            await replace_asset_rows(conn, doc_id, [DocumentAsset(
                id=ident, document_id=doc_id, knowledge_base_id=kb_id, object_key=key, mime_type=mime,
                size_bytes=len(data), page=None, description="", locator_key=f"legacy-{mime}")])
        served = await client.get(f"/api/documents/{doc_id}/assets/{ident}")
        assert served.status_code == 200 and served.content == data
        assert served.headers["content-type"] == "application/octet-stream"
        assert_safe(served, inline=False)


async def test_html_uploaded_as_svg_is_stored_and_served_as_an_html_attachment(client, container) -> None:
    page = b"<html><body><p>" + ENGLISH.encode() + b"</p><script>alert(document.cookie)</script></body></html>"
    kb = await make_kb(client)
    r = await client.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("page.html", page, "image/svg+xml")})
    assert r.status_code == 202 and r.json()["mime_type"] == "text/html", r.text
    doc_id = r.json()["id"]
    served = await client.get(f"/api/documents/{doc_id}/source")
    assert served.status_code == 200 and served.content == page
    assert served.headers["content-type"].startswith("text/html")
    assert_safe(served, inline=False)
    pdf = await client.post(f"/api/knowledge-bases/{kb}/documents",
                            files={"file": ("t.pdf", make_pdf(), "text/html")})
    assert pdf.json()["mime_type"] == "application/pdf"


async def test_one_oversized_image_never_fails_its_document(client, container) -> None:
    doc = await ingest(client, container, await make_kb(client), "big.pdf", make_pdf(image=png(800, 600)))
    assert doc["status"] == "READY", doc
    [asset] = await container.ingest.documents.assets(UUID(doc["id"]))
    width, height = Image.open(io.BytesIO(await container.infra.storage.get(asset.object_key))).size
    assert width * height <= 200_000
    assert doc["warnings"] == [f"an image on page 1 (800×600 pixels) was downscaled to {width}×{height} pixels "
                               "to fit the limits of 200000 pixels and 32.0 MB per image"]
    assert any(ENGLISH in c["content"] for c in await chunks(client, doc["id"]))
    r = await client.post(f"/api/knowledge-bases/{doc['knowledge_base_id']}/search",
                          json={"query": "harbour ferry every twenty minutes", "top_k": 3})
    assert any(h["document_id"] == doc["id"] for h in r.json()["results"])


async def test_inline_pdf_image_is_an_asset_with_its_page(client, container) -> None:
    doc = await ingest(client, container, await make_kb(client), "inline.pdf", inline_image_pdf())
    assert doc["status"] == "READY" and doc["warnings"] == [], doc
    [asset] = await container.ingest.documents.assets(UUID(doc["id"]))
    assert asset.page == 1 and asset.mime_type == "image/png"
    figure = next(c for c in await chunks(client, doc["id"]) if "[Image on page 1]" in c["content"])
    assert figure["locator"]["page"] == 1 and figure["metadata"]["assets"][0]["id"] == str(asset.id)


async def test_downloads_stream_from_storage_and_a_missing_object_is_a_404(client, container, monkeypatch) -> None:
    doc = await ingest(client, container, await make_kb(client), "t.pdf", make_pdf(image=png()))
    [asset] = await container.ingest.documents.assets(UUID(doc["id"]))

    async def whole(key: str) -> bytes:
        raise AssertionError(f"{key} was read whole")

    monkeypatch.setattr(container.infra.storage, "get", whole)
    assert (await client.get(f"/api/documents/{doc['id']}/assets/{asset.id}")).status_code == 200
    assert (await client.get(f"/api/documents/{doc['id']}/source")).status_code == 200
    await container.infra.storage.delete(asset.object_key)
    missing = await client.get(f"/api/documents/{doc['id']}/assets/{asset.id}")
    assert missing.status_code == 404 and missing.json()["detail"] == "the asset is no longer stored"
