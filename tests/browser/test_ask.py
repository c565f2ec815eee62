"""The workbench's Ask tab in a real headless Chromium against a real ``ultimate-rag up`` and worker,
with the answer model played by the stand-in chat server (NOT a language model: it streams the
replies scripted here, so what the page must show is known): the answer streams in, its [n] become
chips, an invented number is removed, a chip opens the document view at the cited passage and chunk,
a follow-up continues the thread (rewritten query shown), and the tab speaks English, 中文 and 한국어.
Screenshots land in the test's tmp dir (``screenshots/``)."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ultimate_rag.testing.llm_servers import StandInChatServer

from ..acceptance.test_up import free_port, wait_until
from ..conftest import TEMPLATE
from .test_workbench import GOOD_MD, browser, sign_in_with_link, start_worker, until

__all__ = ["browser"]
pytestmark = pytest.mark.acceptance


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandInChatServer]:
    server = StandInChatServer(tmp_path_factory.mktemp("ask-standin")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(pg_url: str, template_url: str, standin: StandInChatServer,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    import os

    name = f"ask_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    data_dir: Path = tmp_path_factory.mktemp("ask")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"ULTIMATE_RAG_DATABASE_URL": make_conninfo(pg_url, dbname=name), "ULTIMATE_RAG_DATA_DIR": str(data_dir),
            "ULTIMATE_RAG_LOG_LEVEL": "WARNING", "ULTIMATE_RAG_POLL_INTERVAL_SECONDS": "0.2",
            "ULTIMATE_RAG_SHUTDOWN_GRACE_SECONDS": "0", "PYTHONUNBUFFERED": "1",
            "ULTIMATE_RAG_LLM_BASE_URL": standin.base_url, "ULTIMATE_RAG_LLM_MODEL": "stand-in"}
    log_path = data_dir / "up.log"
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "up", "--workers", "0", "--port", str(port)],
                            env=env, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    workers: list[subprocess.Popen[bytes]] = []
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)
        found = wait_until(lambda: re.search(r"workbench \(logs straight in\): (\S+)", log_path.read_text()), timeout=10)
        assert found is not None
        yield {"base": base, "login_url": found[1], "env": env, "workers": workers, "data_dir": data_dir,
               "key": found[1].split("#key=", 1)[1]}
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


def test_the_ask_tab_streams_a_cited_answer_and_follows_up(server: dict, browser, standin,
                                                           tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    api = httpx.Client(base_url=server["base"], headers={"Authorization": f"Bearer {server['key']}"}, timeout=30)
    kb = api.post("/api/knowledge-bases", json={"name": "Harbour manuals"}).json()["id"]
    doc = api.post(f"/api/knowledge-bases/{kb}/documents", files={"file": ("harbour.md", GOOD_MD.encode())}).json()
    start_worker(server)
    wait_until(lambda: api.get(f"/api/documents/{doc['id']}").json()["status"] == "READY", timeout=120)

    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "Failed to load resource" not in m.text
            else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    sign_in_with_link(page, server["login_url"])
    page.locator(".kb-item", has_text="Harbour manuals").click()
    page.wait_for_selector("#kb-title:has-text('Harbour manuals')")

    # the answer streams in piece by piece; [1] becomes a chip, the invented [9] never shows
    standin.script({"reply": "Pilots must check the lowest astronomical tide [1] before moving a deep vessel [9].",
                    "delay": 0.15})
    page.click("#tab-ask")
    assert page.locator("#panel-ask").is_visible() and page.locator("#panel-documents").is_hidden()
    assert page.get_attribute("#tab-ask", "aria-selected") == "true"
    page.fill("#ask-question", "What must pilots check before moving a deep-draught vessel?")
    page.press("#ask-question", "Enter")
    page.locator(".ask-turn .ask-working").wait_for()  # still writing
    page.locator(".ask-turn .ask-answer", has_text="lowest astronomical tide").wait_for()
    page.locator(".ask-turn .ask-working").wait_for(state="detached")
    answer = page.locator(".ask-turn .ask-answer").first
    assert answer.inner_text().startswith("Pilots must check the lowest astronomical tide")
    assert "9" not in answer.inner_text()
    assert answer.locator(".cite-chip").all_inner_texts() == ["1"]
    assert page.locator(".ask-turn", has_text="citation number(s) that matched no passage were removed").count() == 1
    sources = page.locator(".ask-sources .cite-chip").all_inner_texts()
    assert sources and sources[0].startswith("[1] harbour.md · Harbour operations › Tide tables")
    page.screenshot(path=str(shots / "01-ask-answer.png"), full_page=True)

    # a chip opens the document view at the cited passage and marks the chunk in the preview
    answer.locator(".cite-chip").click()
    page.locator("#doc-dialog[open] #cited-passage").wait_for()
    assert "Tide tables" in page.locator("#cited-passage").inner_text()
    assert "lowest astronomical tide" in page.locator("#cited-passage .chunk-text").inner_text()
    page.locator("#doc-dialog .chunk.cited").wait_for()
    page.screenshot(path=str(shots / "02-cited-passage.png"), full_page=True)
    page.click("#doc-close")

    # a follow-up in the same thread: the earlier turn goes along, the rewritten query is shown
    standin.script({"reply": "When may tankers berth at night?"},
                   {"reply": "Only with two tugs and a pilot on board [1]."})
    page.fill("#ask-question", "And tankers at night?")
    page.click("#ask-submit")
    page.locator(".ask-turn >> nth=1 >> .ask-answer", has_text="two tugs").wait_for()
    page.locator(".ask-turn .ask-working").wait_for(state="detached")
    assert page.locator(".ask-turn").count() == 2
    assert page.locator(".ask-turn").nth(1).locator(".ask-query").inner_text() == \
        "Searched for: When may tankers berth at night?"
    rewrite, final = standin.state()["requests"]
    history = final["body"]["messages"]
    assert "What must pilots check" in history[1]["content"] and history[2]["role"] == "assistant"
    assert "user: What must pilots check" in rewrite["body"]["messages"][-1]["content"]

    # the tab in 中文 and 한국어, strings already shown included
    for lang, tab, you, sources_label in (("zh", "提问", "你", "来源"), ("ko", "질문하기", "나", "출처")):
        page.select_option("#lang", lang)
        until(page, "(t) => document.getElementById('tab-ask').textContent === t", tab)
        assert page.locator(".ask-turn .who").first.inner_text() == you
        assert page.locator(".ask-sources > span").first.inner_text() == sources_label
        page.screenshot(path=str(shots / f"03-ask-{lang}.png"), full_page=True)
    page.select_option("#lang", "en")

    # a new conversation empties the thread; the documents tab hides the Ask panel
    page.click("#ask-new")
    assert page.locator(".ask-turn").count() == 0 and page.locator("#ask-empty").is_visible()
    page.click("#tab-documents")
    assert page.locator("#panel-ask").is_hidden() and page.locator("#panel-documents").is_visible()
    # arrow keys move along the three tabs
    page.focus("#tab-search")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-ask" and page.locator("#panel-ask").is_visible()
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-documents" and page.locator("#panel-ask").is_hidden()
    assert errors == []
    context.close()
    print(f"screenshots: {shots}")
