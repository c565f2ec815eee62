"""Attacks on a real ``ultimate-rag serve`` process (uvicorn, real sockets), each now refused:
bodies sent without a key are never read, JSON routes refuse form bodies and keep the JSON limit
whatever the Content-Type, key bookkeeping happens only after the whole key is verified, event
streams are capped and end when their key is revoked, and /docs needs no network."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ..conftest import TEMPLATE
from .test_up import free_port, wait_until

pytestmark = pytest.mark.acceptance
ADMIN = "hardening-admin-key-0123456789"
H = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture(scope="module")
def server(pg_url: str, template_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    name = f"hard_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    port = free_port()
    data_dir: Path = tmp_path_factory.mktemp("hardening")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ULTIMATE_RAG_")}
    env |= {"ULTIMATE_RAG_DATABASE_URL": make_conninfo(pg_url, dbname=name), "ULTIMATE_RAG_ADMIN_KEY": ADMIN,
            "ULTIMATE_RAG_DATA_DIR": str(data_dir), "ULTIMATE_RAG_LOG_LEVEL": "WARNING",
            "ULTIMATE_RAG_MAX_EVENT_STREAMS_PER_KEY": "2", "ULTIMATE_RAG_MAX_EVENT_STREAMS": "3",
            "ULTIMATE_RAG_EVENT_STREAM_KEY_CHECK_SECONDS": "0.2", "ULTIMATE_RAG_MAX_CONNECTORS_PER_KB": "2"}
    log_path = data_dir / "serve.log"
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "serve", "--port", str(port)], env=env,
                            stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, timeout=90)
        yield {"base": base, "port": port, "pid": proc.pid}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        assert "Traceback" not in log_path.read_text(errors="replace")


def new_kb(base: str) -> str:
    r = httpx.post(f"{base}/api/knowledge-bases", json={"name": f"kb-{uuid.uuid4().hex[:8]}"}, headers=H)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def new_key(base: str, kb: str, role: str = "reader") -> tuple[str, str]:
    r = httpx.post(f"{base}/api/keys", json={"scopes": [{"knowledge_base_id": kb, "role": role}]}, headers=H)
    assert r.status_code == 201, r.text
    return r.json()["key"], r.json()["record"]["id"]


def key_record(base: str, key_id: str) -> dict:
    return next(k for k in httpx.get(f"{base}/api/keys", headers=H).json()["items"] if k["id"] == key_id)


# ---- item 1: no key, no body read; JSON routes keep the JSON limit ----

def test_an_unauthenticated_50_mb_multipart_body_is_never_read(server: dict) -> None:
    kb = new_kb(server["base"])
    size = 50 * 1024 * 1024
    api = psutil.Process(server["pid"])
    rss_before = api.memory_info().rss
    sock = socket.create_connection(("127.0.0.1", server["port"]), timeout=120)
    sock.sendall((f"POST /api/knowledge-bases/{kb}/search HTTP/1.1\r\nHost: x\r\n"
                  f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {size}\r\n\r\n").encode())
    sent = 0

    def send_body() -> None:  # until the server hangs up; a server that reads everything takes all 50 MB
        nonlocal sent
        chunk = b"x" * 65536
        try:
            while sent < size:
                sent += sock.send(chunk[: size - sent])
        except OSError:
            pass

    sender = threading.Thread(target=send_body)
    sender.start()
    head = b""
    while b"\r\n\r\n" not in head:
        part = sock.recv(4096)
        if not part:
            break
        head += part
    sender.join(timeout=120)
    sock.close()
    assert head.startswith(b"HTTP/1.1 401"), head[:200]
    assert sent < size, "the server took the whole body of a request without a key"
    assert api.memory_info().rss - rss_before < 20 * 1024 * 1024
    # a key that is only key-shaped is no better
    r = httpx.post(f"{server['base']}/api/knowledge-bases/{kb}/search", headers={"Authorization": "Bearer urk_0000"},
                   files={"file": ("a.bin", b"x" * 1000)})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_json_routes_refuse_form_bodies_and_keep_the_json_limit(server: dict) -> None:
    base = server["base"]
    kb = new_kb(base)
    connector = httpx.post(f"{base}/api/knowledge-bases/{kb}/connectors", headers=H,
                           json={"kind": "urls", "config": {"urls": ["https://example.com/a"]}}).json()["id"]
    form = {"file": ("big.bin", b"x" * (3 * 1024 * 1024))}  # over the 1 MB JSON limit, far under the upload one
    for method, path in [("POST", f"/api/knowledge-bases/{kb}/search"), ("POST", "/api/knowledge-bases"),
                         ("POST", "/api/keys"), ("POST", f"/api/knowledge-bases/{kb}/connectors"),
                         ("PATCH", f"/api/knowledge-bases/{kb}/connectors/{connector}"),
                         ("POST", f"/api/knowledge-bases/{kb}/reindex")]:
        r = httpx.request(method, base + path, headers=H, files=form)
        assert r.status_code == 415, (method, path, r.status_code, r.text)
        assert "JSON" in r.json()["detail"]
    # whatever Content-Type it claims, a JSON route reads no more than the JSON limit
    r = httpx.post(f"{base}/api/knowledge-bases/{kb}/search", headers={**H, "Content-Type": "text/plain"},
                   content=b"x" * (3 * 1024 * 1024))
    assert r.status_code == 413 and "1048576" in r.json()["detail"]
    # the upload routes still take multipart, up to the upload limit
    r = httpx.post(f"{base}/api/knowledge-bases/{kb}/documents", headers=H,
                   files={"file": ("notes.md", b"# Notes\n\n" + b"word " * 400_000)})
    assert r.status_code == 202, r.text


# ---- item 11: nothing is written for a key that is not verified ----

def test_a_known_prefix_moves_nothing_and_last_used_is_throttled(server: dict) -> None:
    base = server["base"]
    kb = new_kb(base)
    key, key_id = new_key(base, kb)
    prefix = key_record(base, key_id)["prefix"]
    for guess in (f"urk_{prefix}_not-the-secret", f"urk_{prefix}_"):
        assert httpx.get(f"{base}/api/knowledge-bases", headers={"Authorization": f"Bearer {guess}"}).status_code == 401
    assert key_record(base, key_id)["last_used_at"] is None
    own = {"Authorization": f"Bearer {key}"}
    assert httpx.get(f"{base}/api/knowledge-bases/{kb}", headers=own).status_code == 200
    first = key_record(base, key_id)["last_used_at"]
    assert first is not None
    assert httpx.get(f"{base}/api/knowledge-bases/{kb}", headers=own).status_code == 200
    assert key_record(base, key_id)["last_used_at"] == first  # at most one write a minute


# ---- items 4 and 12: event streams are capped, and end when their key is revoked ----

def _open_stream(client: httpx.Client, kb: str, key: str) -> tuple[httpx.Response, Iterator[str]]:
    request = client.build_request("GET", f"/api/knowledge-bases/{kb}/events", params={"max_seconds": 60},
                                   headers={"Authorization": f"Bearer {key}"})
    response = client.send(request, stream=True)
    lines = response.iter_lines()
    if response.status_code == 200:
        assert next(line for line in lines if line.startswith("event:")) == "event: ready"
    return response, lines


def test_event_streams_are_capped_per_key_and_in_total(server: dict) -> None:
    kb = new_kb(server["base"])
    a, _ = new_key(server["base"], kb)
    b, _ = new_key(server["base"], kb)
    with httpx.Client(base_url=server["base"], timeout=30) as client:
        # (response, line iterator) pairs are kept: dropping an iterator closes its stream
        open_ = [_open_stream(client, kb, a), _open_stream(client, kb, a)]
        refused, _ = _open_stream(client, kb, a)
        refused.read()
        assert refused.status_code == 429 and "this key already has 2 streams running" in refused.json()["detail"]
        open_.append(_open_stream(client, kb, b))  # another key still gets one: 3 in all
        refused, _ = _open_stream(client, kb, b)
        refused.read()
        assert refused.status_code == 429 and "too many streams are running on this server" in refused.json()["detail"]
        open_.pop(0)[0].close()

        def reopened() -> bool:  # the slot comes back once the server has seen the stream go
            response, lines = _open_stream(client, kb, b)
            if response.status_code != 200:
                response.read()
                return False
            open_.append((response, lines))
            return True

        wait_until(reopened, timeout=30)
        for response, _ in open_:
            response.close()


def test_a_revoked_key_stops_streaming(server: dict) -> None:
    base = server["base"]
    kb = new_kb(base)
    key, key_id = new_key(base, kb)
    with httpx.Client(base_url=base, timeout=30) as client:
        response, lines = _open_stream(client, kb, key)
        assert response.status_code == 200
        assert httpx.delete(f"{base}/api/keys/{key_id}", headers=H).status_code == 200
        events = [line for line in lines if line.startswith("event:")]  # ends when the server closes it
        response.close()
    assert events == ["event: unauthorized"]  # not "reconnect": it ended long before max_seconds


def test_connectors_per_knowledge_base_are_capped(server: dict) -> None:
    base = server["base"]
    kb = new_kb(base)
    body = {"kind": "urls", "config": {"urls": ["https://example.com/a"]}}
    for _ in range(2):
        assert httpx.post(f"{base}/api/knowledge-bases/{kb}/connectors", json=body, headers=H).status_code == 201
    r = httpx.post(f"{base}/api/knowledge-bases/{kb}/connectors", json=body, headers=H)
    assert r.status_code == 409 and "the most allowed (2)" in r.json()["detail"]
    assert httpx.post(f"{base}/api/knowledge-bases/{new_kb(base)}/connectors", json=body, headers=H).status_code == 201


# ---- item 17: the API docs load nothing from the network ----

def test_the_api_docs_are_served_from_this_server(server: dict) -> None:
    base = server["base"]
    page = httpx.get(f"{base}/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", page.text)
    urls = [u for pair in urls for u in pair if u]
    assert urls and "http" not in page.text.replace(base, "")
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        assert httpx.get(base + url).status_code == 200, url
    assert {"/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css", "/openapi.json"} <= set(urls)
    assert httpx.get(f"{base}/redoc").status_code == 404
