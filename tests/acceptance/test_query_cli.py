"""``ultimate-rag search``, ``ask`` and ``status`` against a real running server, in their human
and ``--json`` forms."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from ultimate_rag.client import Client

pytestmark = pytest.mark.acceptance


def run(live, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"ULTIMATE_RAG_URL": live.url, "ULTIMATE_RAG_API_KEY": key or live.admin_key}
    return subprocess.run([sys.executable, "-m", "ultimate_rag.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def kb(live):
    kb = live.new_kb("query")
    with Client(live.url, live.admin_key) as rag:
        docs = [rag.upload(kb["id"], b"# Harbour\n\n## Mooring\n\nBoats moor at the north quay after sunset.\n",
                           filename="harbour.md"),
                rag.upload(kb["id"], b"# Kitchen\n\nThe galley stove burns paraffin.\n", filename="galley.md")]
        assert {d.status for d in rag.wait_until_ready([d.id for d in docs], timeout=300)} == {"READY"}
    return kb


def test_search_prints_cited_results_and_json(live, kb) -> None:
    human = run(live, "search", "where do boats moor?", "--kb", kb["name"], "--top-k", "2")
    assert human.returncode == 0, human.stderr
    first = human.stdout.splitlines()[0]
    assert first.startswith("1. harbour.md · Harbour > Mooring") and "score" in first
    assert "north quay" in human.stdout

    as_json = run(live, "search", "where do boats moor, berth QY-77?", "--kb", kb["id"], "--json", "--filters",
                  json.dumps({"filename": "harbour*"}))
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["knowledge_base"]["name"] == kb["name"]
    assert data["unmatched_identifiers"] == ["QY-77"]  # an identifier found nowhere
    hit = data["results"][0]
    assert hit["filename"] == "harbour.md" and hit["heading_path"] == ["Harbour", "Mooring"]
    assert hit["citation"] == "harbour.md · Harbour > Mooring · lines 1-5" and "chunk_id" in hit

    other = live.new_kb("elsewhere")
    refused = run(live, "search", "boats", "--kb", kb["name"], key=live.key(other["id"], "reader"))
    assert refused.returncode == 1 and "not found" in refused.stderr and "Traceback" not in refused.stderr


def test_status_in_both_forms(live, kb) -> None:
    human = run(live, "status", "--kb", kb["name"])
    assert human.returncode == 0, human.stderr
    assert kb["name"] in human.stdout and "READY" in human.stdout
    assert "stuck documents: none" in human.stdout and "queue depth: " in human.stdout

    data = json.loads(run(live, "status", "--json").stdout)
    mine = next(k for k in data["knowledge_bases"] if k["id"] == kb["id"])
    assert mine["counts"] == {"READY": 2}
    assert data["stuck"] == [] and isinstance(data["queue_depth"], int)

    reader = json.loads(run(live, "status", "--json", key=live.key(kb["id"], "reader")).stdout)
    assert [k["name"] for k in reader["knowledge_bases"]] == [kb["name"]]
    assert reader["stuck"] is None  # only an admin key sees stuck documents


def test_ask_without_a_model_shows_the_passages_and_answer_null(live, kb) -> None:
    """No LLM is configured here. Where the server has no answer endpoint yet, the command says so
    clearly; where it has one, the answer is null with the reason and the cited passages."""
    paths = httpx.get(f"{live.url}/openapi.json").json()["paths"]
    human = run(live, "ask", "Where do boats moor?", "--kb", kb["name"])
    as_json = run(live, "ask", "Where do boats moor?", "--kb", kb["name"], "--json")
    if "/api/knowledge-bases/{kb_id}/answer" not in paths:
        for result in (human, as_json):
            assert result.returncode == 1 and "no answer endpoint" in result.stderr
            assert "Traceback" not in result.stderr
        return
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith("no answer: ") and "harbour.md" in human.stdout
    data = json.loads(as_json.stdout)
    assert data["answer"] is None and data["reason"]
    assert data["citations"] and data["citations"][0]["filename"] == "harbour.md"


def test_without_a_key_or_a_server_the_commands_say_so(tmp_path) -> None:
    from ultimate_rag.testing.servers import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    for command in (["mcp"], ["status"], ["search", "q", "--kb", "x"]):
        r = subprocess.run([sys.executable, "-m", "ultimate_rag.cli", *command], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "no API key" in r.stderr and "ULTIMATE_RAG_API_KEY" in r.stderr, r.stderr
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "admin.key").write_text("urk_admin_from_the_file\n")
    r = subprocess.run([sys.executable, "-m", "ultimate_rag.cli", "status", "--url", f"http://127.0.0.1:{free_port()}"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "cannot reach the server" in r.stderr and "Traceback" not in r.stderr


def test_ingest_with_metadata_then_search_with_filters(live, tmp_path) -> None:
    kb = live.new_kb("fields")
    (tmp_path / "contracts" / "berlin").mkdir(parents=True)
    (tmp_path / "contracts" / "berlin" / "lease.md").write_text("# Lease\n\nThe office lease runs until March.\n")
    (tmp_path / "contracts" / "memo.md").write_text("# Memo\n\nA memo about the office lease renewal.\n")
    ingest = run(live, "ingest", str(tmp_path / "contracts"), "--kb", kb["name"], "--metadata", "office=Berlin",
                 "--metadata", "year=2025", "--metadata", 'tags=["legal"]', "--wait", "--quiet")
    assert ingest.returncode == 0, ingest.stderr

    def found(*filters: str) -> dict[str, dict]:
        out = run(live, "search", "office lease", "--kb", kb["name"], "--json", *filters)
        assert out.returncode == 0, out.stderr
        return {h["filename"]: h["metadata"] for h in json.loads(out.stdout)["results"]}

    both = found("--filter", "year=2025", "--filter", "office=Berlin")
    assert set(both) == {"lease.md", "memo.md"} and both["memo.md"]["tags"] == ["legal"]
    assert both["lease.md"]["source"]["path"] == "contracts/berlin/lease.md"  # the folder's own name first
    assert both["lease.md"]["source"]["folders"] == ["contracts", "contracts/berlin"]
    assert set(found("--filter", '{"source.folders": {"$contains": "contracts/berlin"}}', "--filter", "year=2025")) \
        == {"lease.md"}  # a JSON condition and a key=value one, together
    again = run(live, "ingest", str(tmp_path / "contracts"), "--kb", kb["name"], "--metadata", "year=2026", "--quiet")
    assert again.returncode == 0, again.stderr  # unchanged files: their fields change, nothing is uploaded
    assert set(found("--filter", "year=2026", "--filter", "office=Berlin")) == {"lease.md", "memo.md"}
    bad = run(live, "search", "x", "--kb", kb["name"], "--filter", '{"year": {"$soon": 1}}')
    assert bad.returncode != 0 and "unknown operator" in bad.stderr and "Traceback" not in bad.stderr
