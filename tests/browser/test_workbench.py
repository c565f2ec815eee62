"""The workbench in a real headless Chromium (Debian's ``chromium``, driven by Playwright for Python)
against a real ``ultimate-rag up`` and a real worker process: log in with the printed URL, create a
knowledge base, upload (drop and pick) files, watch them turn READY / FAILED live, see a 415 next to
its file and a 409 as the busy message, open a document, re-parse it, search, switch languages.
Screenshots of the main screens are saved in the test's tmp dir (``screenshots/``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import ultimate_rag
from ultimate_rag.testing.eventually import eventually_sync

from ..acceptance.test_up import free_port, wait_until
from ..conftest import TEMPLATE

pytestmark = pytest.mark.acceptance

CHROMIUM = os.environ.get("ULTIMATE_RAG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

GOOD_MD = """# Harbour operations

## Tide tables

The harbour master publishes the tide tables every Monday. Pilots must check the
lowest astronomical tide before moving a deep-draught vessel through the channel.

## Night berthing

Night berthing of tankers is allowed only with two tugs and a pilot on board (rule NB-4471).
"""
CORRUPT_PDF = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog" + bytes(range(256)) * 16
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(64)


def _chromium_or_fail() -> str:
    path = shutil.which(CHROMIUM) or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if path is None:
        message = f"Chromium not found at {CHROMIUM} (scripts/test.sh installs Debian's chromium)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.geteuid() == 0:
            # in CI (and as root, where scripts/test.sh installs it) a missing browser is a failure
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def server(pg_url: str, template_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """`ultimate-rag up --workers 0` (API + printed login URL); the test starts the worker itself."""
    name = f"web_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    data_dir: Path = tmp_path_factory.mktemp("workbench")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"ULTIMATE_RAG_DATABASE_URL": make_conninfo(pg_url, dbname=name), "ULTIMATE_RAG_DATA_DIR": str(data_dir),
            "ULTIMATE_RAG_MAX_UPLOAD_BYTES": "200000", "ULTIMATE_RAG_LOG_LEVEL": "WARNING",
            "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.2", "ULTIMATE_RAG_RETRY_DELAY_SECONDS": "0.1",
            "ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS": "0", "PYTHONUNBUFFERED": "1"}
    log_path = data_dir / "up.log"
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "up", "--workers", "0", "--port", str(port)],
                            env=env, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    workers: list[subprocess.Popen[bytes]] = []
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)
        found = wait_until(lambda: re.search(r"workbench \(logs straight in\): (\S+)", log_path.read_text()), timeout=10)
        assert found is not None
        yield {"base": base, "login_url": found[1], "env": env, "workers": workers, "data_dir": data_dir}
    finally:
        for p in [*workers, proc]:
            if p.poll() is None:
                p.terminate()
        for p in [*workers, proc]:
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        log = log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]


def start_worker(server: dict) -> None:
    log = (server["data_dir"] / f"worker-{len(server['workers'])}.log").open("wb")
    server["workers"].append(subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "worker"],
                                              env=server["env"], stdout=log, stderr=subprocess.STDOUT))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    path = _chromium_or_fail()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # Playwright gives every launch a fresh, empty --user-data-dir of its own
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def sign_in_with_link(page, url: str) -> None:
    """Open a `#key=` link and accept its key: the workbench asks first, even in a fresh tab."""
    page.goto(url)
    page.locator("#confirm-dialog").wait_for()
    page.click("#confirm-ok")
    page.wait_for_selector("body[data-ready=true]")


def row(page, filename: str):
    return page.locator("#doc-rows tr", has=page.locator("td.filename", has_text=filename))


def wait_status(page, filename: str, status: str, timeout: float = 90_000) -> None:
    row(page, filename).and_(page.locator(f'tr[data-status="{status}"]')).wait_for(timeout=timeout)


def until(page, expression: str, arg: object = None, timeout: float = 30.0) -> None:
    """Poll a JS function in the page (page.wait_for_function evaluates strings, which the CSP forbids)."""
    eventually_sync(lambda: page.evaluate(expression, arg), timeout=timeout, what=expression)


def drop_files(page, files: list[tuple[str, str, bytes]]) -> None:
    """A real drop event on the drop zone, carrying File objects in its DataTransfer."""
    page.evaluate("""(files) => {
        const dt = new DataTransfer();
        for (const [name, type, bytes] of files) dt.items.add(new File([new Uint8Array(bytes)], name, { type }));
        const zone = document.getElementById("dropzone");
        zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
        zone.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    }""", [[n, t, list(b)] for n, t, b in files])


def scripts_are_modules(page) -> None:
    """Every script of the page is an ES module that the page loaded, and none leaves a global behind."""
    assert page.evaluate("() => [...document.scripts].map((s) => s.type)") == ["module"]
    loaded = page.evaluate("() => performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname)")
    web = Path(ultimate_rag.__file__).parent / "api" / "web"
    assert {f"/web/{p.name}" for p in web.glob("*.js")} <= set(loaded)
    leaked = ["state", "t", "h", "api", "loadKbs", "runAction", "openDocument", "loadPage", "renderSearch", "thread", "STATUSES"]
    assert page.evaluate("(names) => names.filter((n) => n in window)", leaked) == []


# The published revision (SPEC §4): fields the document JSON carries beside `status`. The rendering
# module is run in the page on document JSON written here, as a server with rebuilds would send it.
SEARCHABILITY = """async (docs) => {
    const m = await import("/web/searchability.js");
    const rows = await import("/web/documents.js");
    return docs.map((d) => [m.searchability(d), m.searchabilityText(d, true),
                            rows.renderRow(d).querySelector(".status-cell .searchability").textContent]);
}"""
DOC = {"id": "00000000-0000-0000-0000-000000000001", "filename": "x.md", "attempts": 1, "max_attempts": 3,
       "updated_at": None, "progress": {}, "chunk_count": 3}
REBUILDING = DOC | {"status": "EMBEDDING", "searchable": True, "published_revision": 1, "content_revision": 2}


def published_revision_is_shown(page) -> None:
    docs = [DOC | {"status": "READY", "searchable": True, "published_revision": 2, "content_revision": 2},
            REBUILDING,
            DOC | {"status": "FAILED", "searchable": True, "published_revision": 1, "content_revision": 2},
            DOC | {"status": "PENDING", "searchable": False, "published_revision": None, "content_revision": 1},
            DOC | {"status": "FAILED", "searchable": False, "published_revision": None, "content_revision": 1},
            DOC | {"status": "READY"},  # an older server: neither field, only READY is searched
            DOC | {"status": "INDEXING"}]
    assert page.evaluate(SEARCHABILITY, docs) == [
        ["searchable", "searchable (revision 2)", "searchable"],
        ["searchable_previous", "searchable: previous version (revision 1)", "searchable: previous version"],
        ["searchable_previous", "searchable: previous version (revision 1)", "searchable: previous version"],
        ["not_searchable", "not searchable", "not searchable"],
        ["not_searchable", "not searchable", "not searchable"],
        ["searchable", "searchable", "searchable"],
        ["not_searchable", "not searchable", "not searchable"]]


def ocr_progress_is_shown(page) -> None:
    """A scan being read by OCR: pages done / total, and the time left while there is an estimate."""
    docs = [DOC | {"status": "PARSING", "progress": {"stage": "PARSING", "done": 3, "total": 12, "eta_seconds": 250}},
            DOC | {"status": "PARSING", "progress": {"stage": "PARSING", "done": 0, "total": 12}}]
    texts = page.evaluate("""async (docs) => {
        const rows = await import("/web/documents.js");
        return docs.map((d) => rows.renderRow(d).querySelector(".progress-cell span").textContent);
    }""", docs)
    assert texts == ["3/12 pages read, about 4 min left", "0/12 pages read"]


def test_the_workbench_end_to_end(server: dict, browser, tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "409" not in m.text
            and "415" not in m.text and "Failed to load resource" not in m.text else None)

    # log in with the URL `up` printed: the key is taken from the fragment and leaves the address bar
    assert "#key=" in server["login_url"]
    sign_in_with_link(page, server["login_url"])
    assert "key=" not in page.url
    assert page.evaluate("sessionStorage.getItem('ultimate-rag.key')").startswith("urk_admin_")
    assert page.locator("#main").is_visible() and page.locator("#login").is_hidden()
    scripts_are_modules(page)

    # create a knowledge base with chunking and dedup settings
    page.click("#kb-create-box summary")
    page.fill("#kb-name", "Harbour manuals")
    page.fill("#kb-description", "Port operations")
    page.fill("#kb-chunk-size", "128")
    page.fill("#kb-chunk-overlap", "16")
    page.select_option("#kb-dedup", "exact")
    page.click("#kb-create button[type=submit]")
    page.wait_for_selector("#kb-title:has-text('Harbour manuals')")
    page.evaluate("window.__noReload = true")  # gone if the page reloads

    # the status filter lists the statuses the API serves (GET /api/statuses), in its order
    key = page.evaluate("sessionStorage.getItem('ultimate-rag.key')")
    served = httpx.get(f"{server['base']}/api/statuses", headers={"Authorization": f"Bearer {key}"}).json()
    statuses = [s["name"] for s in served["document_statuses"]]
    assert page.locator("#status-filter option").evaluate_all("(os) => os.map((o) => o.value)") == ["", *statuses]

    # record every status a row is rendered with (rows are re-rendered on each event), and every
    # FAILED row painted without its reason (what a user would see, however briefly)
    page.evaluate("""() => {
        window.__seen = {};
        window.__failedWithoutReason = [];
        new MutationObserver((records) => { for (const r of records) for (const n of r.addedNodes) {
            if (!n.dataset || !n.dataset.id) continue;
            (window.__seen[n.dataset.id] ||= []).push(n.dataset.status);
            const reason = n.querySelector("td.error-cell");
            if (n.dataset.status === "FAILED" && !(reason && reason.textContent.trim()))
                window.__failedWithoutReason.push(n.dataset.id);
        } }).observe(document.getElementById("doc-rows"), { childList: true });
    }""")

    # upload: one file dropped, two picked; no worker runs yet, so they wait in PENDING
    drop_files(page, [("harbour.md", "text/markdown", GOOD_MD.encode())])
    page.set_input_files("#file-input", [
        {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": CORRUPT_PDF},
        {"name": "picture.txt", "mimeType": "text/plain", "buffer": PNG},
    ])
    rejected = page.locator('li.upload[data-name="picture.txt"]')
    rejected.locator(".upload-msg:has-text('415')").wait_for()
    assert "failed" in (rejected.get_attribute("class") or "")
    page.locator('li.upload.ok[data-name="harbour.md"]').wait_for()
    page.locator('li.upload.ok[data-name="broken.pdf"]').wait_for()
    assert page.locator('li.upload[data-name="harbour.md"] progress').get_attribute("value") == "100"
    wait_status(page, "harbour.md", "PENDING")
    assert row(page, "picture.txt").count() == 0
    # the operations a status allows come from the API: a queued document may be failed, not recovered
    assert row(page, "harbour.md").locator("[data-action=fail]").count() == 1
    assert row(page, "harbour.md").locator("[data-action=recover]").count() == 0
    assert row(page, "harbour.md").locator(".searchability").inner_text() == "not searchable"
    page.screenshot(path=str(shots / "01-uploads.png"), full_page=True)

    # a 409: re-parsing a document that is still queued shows the busy message, not a crash (a delete
    # is accepted: it replaces what was queued)
    row(page, "harbour.md").locator("[data-action=reindex]").click()
    notice = page.locator("#notice")
    notice.wait_for()
    assert "busy (Pending)" in notice.inner_text() and "try again when it finishes" in notice.inner_text()
    page.screenshot(path=str(shots / "02-busy-409.png"), full_page=True)

    # a worker starts: the statuses change live, without a reload
    start_worker(server)
    wait_status(page, "harbour.md", "READY")
    wait_status(page, "broken.pdf", "FAILED")
    assert page.evaluate("window.__noReload") is True
    assert page.evaluate("window.__failedWithoutReason") == []  # FAILED is never painted before its reason
    assert "corrupt" in row(page, "broken.pdf").locator("td.error-cell").inner_text()
    assert row(page, "harbour.md").locator(".searchability").inner_text() == "searchable"
    assert row(page, "broken.pdf").locator(".searchability").inner_text() == "not searchable"
    assert page.locator("#live").inner_text() == "Live"
    good_id = row(page, "harbour.md").get_attribute("data-id")
    seen = page.evaluate("window.__seen")[good_id]
    assert seen[0] == "PENDING" and seen[-1] == "READY"
    assert {"PARSING", "CHUNKING", "EMBEDDING", "INDEXING"} & set(seen), seen
    page.screenshot(path=str(shots / "03-documents-live.png"), full_page=True)

    # the document view: timeline, attempts, chunk preview from the snapshot
    row(page, "harbour.md").locator("td.filename button").click()
    dialog = page.locator("#doc-dialog")
    dialog.locator(".chunk").first.wait_for()
    stages = dialog.locator(".timeline li").all_inner_texts()
    assert len(stages) >= 5 and "Ready" in stages[-1], stages
    assert "Tide tables" in dialog.locator(".chunk-list").inner_text()
    assert "tokens" in dialog.locator(".chunk-meta").first.inner_text()
    assert dialog.locator(".facts .searchability").inner_text().startswith("searchable")
    published_revision_is_shown(page)
    ocr_progress_is_shown(page)
    page.screenshot(path=str(shots / "04-document-view.png"), full_page=True)
    page.click("#doc-close")

    # the failed one shows its error history
    row(page, "broken.pdf").locator("td.filename button").click()
    dialog.locator(".history li").first.wait_for()
    assert "corrupt" in dialog.locator(".history").inner_text()
    page.click("#doc-close")

    # re-parse: the document goes through the stages again, live
    page.evaluate("(id) => { window.__seen[id] = []; }", good_id)
    row(page, "harbour.md").locator("[data-action=reindex]").click()
    until(page, "(id) => (window.__seen[id] || []).includes('PENDING')", good_id)
    wait_status(page, "harbour.md", "READY")
    until(page, "(id) => window.__seen[id].at(-1) === 'READY'", good_id)
    again = page.evaluate("window.__seen")[good_id]
    assert {"PARSING", "CHUNKING", "EMBEDDING", "INDEXING"} & set(again), again

    # filters: by status and by file name
    names = "() => [...document.querySelectorAll('#doc-rows td.filename')].map((td) => td.textContent).join(',')"
    page.select_option("#status-filter", "FAILED")
    until(page, f"() => ({names})() === 'broken.pdf'")
    page.select_option("#status-filter", "")
    until(page, f"() => ({names})() === 'broken.pdf,harbour.md'", timeout=90.0)
    page.fill("#name-filter", "HARB")
    until(page, f"() => ({names})() === 'harbour.md'")
    page.fill("#name-filter", "")
    until(page, f"() => ({names})() === 'broken.pdf,harbour.md'", timeout=90.0)

    # search: a ranked, cited result
    page.click("#tab-search")
    page.fill("#search-query", "when may tankers berth at night?")
    page.click("#search-form button[type=submit]")
    first = page.locator("#search-results li.result").first
    first.wait_for()
    assert first.locator(".cite-file").inner_text() == "harbour.md"
    assert "Harbour operations" in first.locator(".cite-heading").inner_text()
    assert "lines" in first.locator(".cite-loc").inner_text()
    assert "tankers" in [m.lower() for m in first.locator("mark").all_inner_texts()]  # highlighted matches
    page.screenshot(path=str(shots / "05-search.png"), full_page=True)
    # an identifier: its holder first, highlighted as written; one found nowhere, said above the results
    page.fill("#search-query", "ＮＢ－４４７１ or NB-9999?")
    page.click("#search-form button[type=submit]")
    page.locator("#search-unmatched").wait_for()
    assert "NB-9999" in page.locator("#search-unmatched").inner_text()
    assert "NB-4471" in first.locator("mark").all_inner_texts()
    page.fill("#search-query", "when may tankers berth at night?")
    page.click("#search-form button[type=submit]")
    until(page, "() => document.getElementById('search-unmatched').hidden")
    # mode, filters, and a citation that opens the document at its passage
    page.select_option("#search-mode", "sparse")
    page.fill("#search-filename", "*.pdf")
    page.click("#search-form button[type=submit]")
    until(page, "() => /0|no/i.test(document.getElementById('search-status').textContent)"
                " && !document.querySelector('#search-results li')")
    page.fill("#search-filename", "harb*")
    page.fill("#search-heading", "harbour")
    page.select_option("#search-mode", "hybrid")
    page.click("#search-form button[type=submit]")
    first.wait_for()
    assert first.locator(".cite-file").inner_text() == "harbour.md"
    first.locator("button.cite-loc").click()
    dialog.locator(".chunk.focus").wait_for()
    assert dialog.locator(".chunk.focus").is_visible()
    page.click("#doc-close")
    page.fill("#search-filename", "")
    page.fill("#search-heading", "")

    # languages: 中文 and 한국어, switchable, and every visible string changes
    page.select_option("#lang", "zh")
    until(page, "() => document.documentElement.lang === 'zh-CN'")
    assert page.locator("#tab-documents").inner_text() == "文档"
    assert page.locator("#tab-search").inner_text() == "检索"
    assert page.locator("#kbs-title").inner_text() == "知识库"
    page.click("#tab-documents")
    assert row(page, "harbour.md").locator(".badge").inner_text() == "已就绪"
    assert row(page, "harbour.md").locator("[data-action=reindex]").inner_text() == "重新解析"
    assert "不支持的文件格式" in rejected.locator(".upload-msg").inner_text()  # messages already shown change too
    assert page.locator('li.upload[data-name="harbour.md"] .upload-msg').inner_text() == "已上传"
    assert row(page, "harbour.md").locator(".searchability").inner_text() == "可检索"
    assert page.evaluate(SEARCHABILITY, [REBUILDING])[0][1:] == ["可检索：上一版本 (第 1 版)", "可检索：上一版本"]
    page.screenshot(path=str(shots / "06-zh.png"), full_page=True)
    page.select_option("#lang", "ko")
    until(page, "() => document.documentElement.lang === 'ko'")
    assert page.locator("#tab-documents").inner_text() == "문서"
    assert row(page, "harbour.md").locator(".badge").inner_text() == "준비 완료"
    assert page.locator("#live").inner_text() == "실시간"
    assert page.evaluate(SEARCHABILITY, [REBUILDING])[0][1] == "검색 가능: 이전 버전 (1번째 버전)"
    page.screenshot(path=str(shots / "07-ko.png"), full_page=True)
    page.reload()  # the choice is remembered
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#kbs-title").inner_text() == "지식 베이스"
    page.select_option("#lang", "en")

    # a phone-width screen
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator(".kb-item").first.click()
    wait_status(page, "harbour.md", "READY")
    page.screenshot(path=str(shots / "08-phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1  # no sideways scrolling page

    assert not errors, errors
    context.close()
    print(f"screenshots: {shots}")


def test_a_wrong_key_is_refused_and_the_login_form_is_shown(server: dict, browser) -> None:
    context = browser.new_context()
    page = context.new_page()
    sign_in_with_link(page, server["base"] + "/#key=not-a-real-key")
    assert page.locator("#login").is_visible()
    assert "rejected" in page.locator("#login-error").inner_text()
    assert page.evaluate("sessionStorage.getItem('ultimate-rag.key')") is None
    key = (server["data_dir"] / "admin.key").read_text().strip()
    page.fill("#login-key", key)
    page.press("#login-key", "Enter")
    page.locator("#main").wait_for()
    assert page.locator(".kb-item").count() >= 0
    context.close()


def test_the_page_is_served_with_a_strict_policy_and_no_key_in_requests(server: dict) -> None:
    r = httpx.get(server["base"] + "/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert "<script>" not in r.text and "style=" not in r.text  # no inline code: the CSP would block it
    for path in ("/web/app.js", "/web/style.css", "/web/i18n/en.json", "/web/i18n/zh.json", "/web/i18n/ko.json"):
        assert httpx.get(server["base"] + path).status_code == 200, path
    assert httpx.get(server["base"] + "/web/../cli.py").status_code == 404
    assert httpx.get(server["base"] + "/docs").status_code == 200  # the API docs are still where they were
    assert httpx.get(server["base"] + "/healthz").status_code == 200


def test_bulk_actions_keyboard_and_labels(server: dict, browser, tmp_path: Path) -> None:
    """A selection deleted in one go (soft, chosen in the confirmation), driven from the keyboard;
    every form control has an accessible name."""
    key = (server["data_dir"] / "admin.key").read_text().strip()
    h = {"Authorization": f"Bearer {key}"}
    kb = httpx.post(f"{server['base']}/api/knowledge-bases", json={"name": "Bulk"}, headers=h).json()["id"]
    for name in ("one.md", "two.md"):
        httpx.post(f"{server['base']}/api/knowledge-bases/{kb}/documents", headers=h,
                   files={"file": (name, f"# {name}\n\nSome text about {name}.\n".encode())})
    if not server["workers"]:
        start_worker(server)

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_in_with_link(page, server["base"] + "/#key=" + key)
    page.locator(".kb-item", has_text="Bulk").click()
    wait_status(page, "one.md", "READY")
    wait_status(page, "two.md", "READY")

    unnamed = page.evaluate("""() => [...document.querySelectorAll("input, select, textarea, button")]
        .filter((el) => !el.closest("[hidden], dialog:not([open])") && el.type !== "hidden")
        .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.textContent.trim())
        .map((el) => el.outerHTML)""")
    assert unnamed == []

    # keyboard only: select all, then the bulk delete, the soft choice, confirm
    page.focus("#select-all")
    page.keyboard.press("Space")
    assert page.locator("#bulk-count").inner_text() == "2 selected"
    page.focus("[data-bulk=delete]")
    page.keyboard.press("Enter")
    page.locator("#confirm-dialog").wait_for()
    assert page.locator("#confirm-title").inner_text() == "Delete 2 document(s)?"
    assert page.locator("input[value=soft]").is_checked()
    page.keyboard.press("Escape")  # cancelled: nothing happens
    page.locator("#confirm-dialog").wait_for(state="hidden")
    until(page, "() => document.querySelectorAll('#doc-rows tr[data-status=READY]').length === 2")
    page.focus("[data-bulk=delete]")
    page.keyboard.press("Enter")
    page.focus("#confirm-ok")
    page.keyboard.press("Enter")
    wait_status(page, "one.md", "DELETED")
    wait_status(page, "two.md", "DELETED")
    assert "2 done, 0 busy" in page.locator("#notice").inner_text()
    until(page, "() => document.getElementById('kb-counts').textContent.startsWith('2 documents · 0 ready')")

    # arrow keys move between the tabs
    page.focus("#tab-documents")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-search"
    assert page.locator("#panel-search").is_visible() and page.locator("#panel-documents").is_hidden()
    page.screenshot(path=str(tmp_path / "bulk-deleted.png"), full_page=True)
    context.close()


def test_a_key_link_never_switches_keys_silently(server: dict, browser) -> None:
    """Login CSRF: a crafted `#key=` link must not replace the key the tab already holds without asking."""
    base = server["base"]
    admin = (server["data_dir"] / "admin.key").read_text().strip()
    h = {"Authorization": f"Bearer {admin}"}
    kb = httpx.post(f"{base}/api/knowledge-bases", json={"name": "Attacker's"}, headers=h).json()["id"]
    other = httpx.post(f"{base}/api/keys", json={"scopes": [{"knowledge_base_id": kb, "role": "editor"}]},
                       headers=h).json()["key"]
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    stored = "() => sessionStorage.getItem('ultimate-rag.key')"
    sign_in_with_link(page, server["login_url"])
    assert page.evaluate(stored) == admin

    # a link that loads the page anew: asked, and "Cancel" keeps the key the tab had
    page.goto(f"{base}/?from=mail#key={other}")
    page.locator("#confirm-dialog").wait_for()
    assert page.locator("#confirm-title").inner_text() == "Switch to another API key?"
    assert other[:12] in page.locator("#confirm-text").inner_text() and other not in page.content()
    assert page.evaluate(stored) == admin and "key=" not in page.url
    page.keyboard.press("Escape")
    page.wait_for_selector("body[data-ready=true]")
    assert page.evaluate(stored) == admin
    assert page.locator("#main").is_visible()

    # a link followed while the page is open (only the fragment changes): asked too; accepted, it switches
    page.evaluate("(k) => { location.hash = 'key=' + encodeURIComponent(k); }", other)
    page.locator("#confirm-dialog").wait_for()
    assert page.evaluate(stored) == admin
    page.click("#confirm-ok")
    until(page, f"() => sessionStorage.getItem('ultimate-rag.key') === {other!r}")
    until(page, "() => document.getElementById('kb-list').textContent.includes(\"Attacker's\")")
    context.close()


def test_a_key_link_never_signs_in_silently_in_a_fresh_tab(server: dict, browser) -> None:
    """Login CSRF in a tab that holds no key yet: the link asks too, and "Cancel" leaves the tab
    signed out, with the key gone from the address bar."""
    admin = (server["data_dir"] / "admin.key").read_text().strip()
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    stored = "() => sessionStorage.getItem('ultimate-rag.key')"
    page.goto(server["login_url"])
    page.locator("#confirm-dialog").wait_for()
    assert page.locator("#confirm-title").inner_text() == "Sign in with the API key from this link?"
    assert admin[:12] in page.locator("#confirm-text").inner_text() and admin not in page.content()
    assert page.evaluate(stored) is None and "key=" not in page.url
    page.keyboard.press("Escape")
    page.wait_for_selector("body[data-ready=true]")
    assert page.evaluate(stored) is None
    assert page.locator("#login").is_visible() and page.locator("#main").is_hidden()

    sign_in_with_link(page, server["login_url"])  # asked again, accepted: signed in
    page.locator("#main").wait_for()  # shown once the key has been checked with the server
    assert page.evaluate(stored) == admin and page.locator("#main").is_visible()
    context.close()


def test_a_list_read_while_a_document_changes_never_leaves_the_row_stale(server: dict, browser) -> None:
    """The list is read (a filter, a reconnect's catch-up) while live events change a row: the list's
    older picture of that document must not stay on screen. The list response is held back in the
    browser (Playwright's routing: the server is real, only the response's arrival is delayed)."""
    key = (server["data_dir"] / "admin.key").read_text().strip()
    api = httpx.Client(base_url=server["base"], headers={"Authorization": f"Bearer {key}"}, timeout=30)
    kb = api.post("/api/knowledge-bases", json={"name": "Stale lists"}).json()["id"]
    doc = api.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("stale.md", b"# Stale\n\nSome text.\n")}).json()
    if not server["workers"]:
        start_worker(server)
    wait_until(lambda: api.get(f"/api/documents/{doc['id']}").json()["status"] == "READY", timeout=120)
    stale = api.get(f"/api/knowledge-bases/{kb}/documents", params={"limit": 50, "q": "stale"}).text

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_in_with_link(page, server["base"] + "/#key=" + key)
    page.locator(".kb-item", has_text="Stale lists").click()
    wait_status(page, "stale.md", "READY")

    held: list = []

    def hold_or_answer_stale(route) -> None:
        if not held:
            held.append(route)  # the first list read waits until the document has changed
        else:
            route.fulfill(status=200, content_type="application/json", body=stale)

    page.route(re.compile(r"/api/knowledge-bases/[0-9a-f-]+/documents\?"), hold_or_answer_stale)
    page.fill("#name-filter", "stale")

    def requested() -> bool:
        page.evaluate("() => true")  # lets Playwright deliver the routed request
        return bool(held)

    eventually_sync(requested, timeout=30, what="the list was requested")
    assert api.delete(f"/api/documents/{doc['id']}").status_code == 202
    wait_status(page, "stale.md", "DELETED")  # live, while the list read is still in flight
    page.evaluate("""(id) => { window.__after = [];
        new MutationObserver((records) => { for (const r of records) for (const n of r.addedNodes)
            if (n.dataset && n.dataset.id === id) window.__after.push(n.dataset.status);
        }).observe(document.getElementById("doc-rows"), { childList: true }); }""", doc["id"])
    # the list says READY (read before the delete): the row keeps its newer status and is fetched again
    with page.expect_response(lambda r: r.url.endswith(f"/api/documents/{doc['id']}"), timeout=15_000):
        held[0].fulfill(status=200, content_type="application/json", body=stale)
    until(page, "() => window.__after.length > 0")  # the list was rendered
    wait_status(page, "stale.md", "DELETED")
    assert "READY" not in page.evaluate("window.__after")
    context.close()


def test_metadata_is_shown_edited_and_filtered_on(server: dict, browser) -> None:
    """The document view shows the fields filled in from the file (read-only) and the user's (JSON,
    editable: saved as a merge patch, no rebuild); the search panel filters on them and each hit
    shows them; a malformed filter is said, not sent."""
    if not server["workers"]:
        start_worker(server)
    key = server["login_url"].split("#key=", 1)[1]
    auth = {"Authorization": f"Bearer {key}"}
    kb = httpx.post(f"{server['base']}/api/knowledge-bases", json={"name": "Fleet"}, headers=auth).json()
    ids = {}
    for name, text, meta in (("ferry.md", "---\ntitle: Ferry rules\n---\n# Ferries\n\nFerries dock at pier two.\n",
                              {"fleet": "ferry"}),
                             ("tug.md", "# Tugs\n\nTugs dock at pier two after towing.\n", {"fleet": "tug"})):
        r = httpx.post(f"{server['base']}/api/knowledge-bases/{kb['id']}/documents", headers=auth,
                       files={"file": (name, text.encode())}, data={"metadata": json.dumps(meta)})
        assert r.status_code == 202, r.text
        ids[name] = r.json()["id"]
    eventually_sync(lambda: all(httpx.get(f"{server['base']}/api/documents/{i}", headers=auth).json()["status"]
                                == "READY" for i in ids.values()), timeout=120, what="both READY")

    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in_with_link(page, server["login_url"])
    page.locator(".kb-item", has_text="Fleet").click()
    wait_status(page, "ferry.md", "READY")
    row(page, "ferry.md").locator("td.filename button").click()
    dialog = page.locator("#doc-dialog")
    dialog.locator("#doc-metadata").wait_for()
    assert "Ferry rules" in dialog.locator(".metadata-filled").inner_text()  # doc.title, from the front matter
    assert json.loads(dialog.locator("#doc-metadata").input_value()) == {"fleet": "ferry"}
    dialog.locator("#doc-metadata").fill('{"fleet": "ferry", "year": 2025}')
    dialog.locator("#doc-metadata-save").click()
    until(page, "() => /Saved/.test(document.getElementById('doc-metadata-status')?.textContent || '')")
    assert json.loads(dialog.locator("#doc-metadata").input_value()) == {"fleet": "ferry", "year": 2025}
    dialog.locator("#doc-metadata").fill("{not json")
    dialog.locator("#doc-metadata-save").click()
    until(page, "() => /Not a JSON object/.test(document.getElementById('doc-metadata-status').textContent)")
    page.click("#doc-close")
    stored = httpx.get(f"{server['base']}/api/documents/{ids['ferry.md']}", headers=auth).json()
    assert stored["metadata"]["year"] == 2025 and stored["published_revision"] == 1  # nothing rebuilt

    page.click("#tab-search")
    page.fill("#search-query", "where do they dock?")
    for text, expected in (("year=2025", ["ferry.md"]), ('{"fleet": {"$in": ["tug"]}}', ["tug.md"]), ("", None)):
        page.fill("#search-metadata", text)
        page.click("#search-form button[type=submit]")
        until(page, "() => /result/i.test(document.getElementById('search-status').textContent)")
        files = page.locator("#search-results .cite-file").all_inner_texts()
        if expected is not None:
            assert files == expected, (text, files)
    hit = page.locator("#search-results li.result", has=page.locator(".cite-file", has_text="ferry.md"))
    assert "fleet: ferry" in hit.locator(".metadata-line").inner_text()
    page.fill("#search-metadata", "year")
    page.click("#search-form button[type=submit]")
    until(page, "() => /key=value/.test(document.getElementById('search-status').textContent)")
    page.fill("#search-metadata", '{"year": {"$soon": 1}}')
    page.click("#search-form button[type=submit]")
    until(page, "() => /unknown operator/.test(document.getElementById('search-status').textContent)")
    assert not errors, errors
    context.close()
