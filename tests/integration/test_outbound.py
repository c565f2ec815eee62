"""The outbound HTTP helper against real HTTP servers on loopback: refused addresses are refused
before any connection is made, redirects are checked hop by hop, answers are pinned, and size and
time are capped. (The only servers here are on 127.0.0.1; every refused address in these tests is
refused before a packet is sent.)"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from ultimate_rag.adapters.http.outbound import (
    OutboundPolicy,
    OutboundRefusedError,
    ResponseTooLargeError,
    SafeHttpClient,
)
from ultimate_rag.domain.errors import TransientError


class Handler(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        Handler.seen.append((self.path, self.headers.get("Host", "")))
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", self.path.split("to=", 1)[1])
            self.end_headers()
            return
        if self.path == "/big":
            body = b"x" * 200_000
        elif self.path == "/slow":
            time.sleep(2)  # the scenario: a server slower than the client's timeout
            body = b"late"
        else:
            body = b"hello " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(autouse=True)
def _clear() -> None:
    Handler.seen.clear()


def client(allow: str = "") -> SafeHttpClient:
    return SafeHttpClient(OutboundPolicy(allow))


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x", "http://[::1]:9/x", "http://10.1.2.3/x",
                                 "http://192.168.0.1/", "http://172.16.5.4/", "http://169.254.169.254/latest/meta-data",
                                 "http://100.64.0.1/", "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/",
                                 "http://[fd00:ec2::254]/", "http://[fe80::1]/", "http://localhost:9/",
                                 "http://[64:ff9b::a00:1]/", "ftp://example.com/", "file:///etc/passwd"])
async def test_refused_before_connecting(url: str) -> None:
    with pytest.raises(OutboundRefusedError):
        await client().fetch(url, max_bytes=1000, timeout=5)


async def test_loopback_is_refused_by_default_and_fetches_when_allowed(server: str) -> None:
    with pytest.raises(OutboundRefusedError, match="loopback"):
        await client().fetch(f"{server}/a", max_bytes=1000, timeout=5)
    assert Handler.seen == []  # nothing reached the server
    result = await client("127.0.0.1/32").fetch(f"{server}/a", max_bytes=1000, timeout=5)
    assert result.status_code == 200 and result.content == b"hello /a"


async def test_each_redirect_is_checked(server: str) -> None:
    allowed = client("127.0.0.1/32")
    with pytest.raises(OutboundRefusedError, match=re.escape("10.1.2.3")):
        await allowed.fetch(f"{server}/redirect?to=http://10.1.2.3/secret", max_bytes=1000, timeout=5)
    with pytest.raises(OutboundRefusedError, match=re.escape("169.254.169.254")):
        await allowed.fetch(f"{server}/redirect?to=http://169.254.169.254/", max_bytes=1000, timeout=5)
    port = server.rsplit(":", 1)[1]

    async def mixed(host: str, p: int) -> list[str]:  # one refused answer refuses the host
        return ["127.0.0.1", "10.0.0.5"] if host == "mixed.test" else ["127.0.0.1"]

    with pytest.raises(OutboundRefusedError, match=re.escape("the address of host mixed.test is not allowed")) as refused:
        await SafeHttpClient(OutboundPolicy("127.0.0.1/32"), resolver=mixed).fetch(
            f"{server}/redirect?to=http://mixed.test:{port}/b", max_bytes=1000, timeout=5)
    assert "10.0.0.5" not in str(refused.value)  # what an inside name resolves to is never said
    assert [path for path, _ in Handler.seen] == ["/redirect?to=http://10.1.2.3/secret",
                                                  "/redirect?to=http://169.254.169.254/",
                                                  f"/redirect?to=http://mixed.test:{port}/b"]
    ok = await allowed.fetch(f"{server}/redirect?to=/final", max_bytes=1000, timeout=5)
    assert ok.content == b"hello /final" and len(ok.redirects) == 1


async def test_the_checked_address_is_the_one_connected_to(server: str) -> None:
    port = int(server.rsplit(":", 1)[1])
    answers: list[str] = []

    async def rebinding_resolver(host: str, p: int) -> list[str]:
        # answers safely once, would answer a private address next time: it must be asked once
        answers.append(host)
        return ["127.0.0.1"] if len(answers) == 1 else ["10.0.0.1"]

    pinned = SafeHttpClient(OutboundPolicy("127.0.0.1/32"), resolver=rebinding_resolver)
    result = await pinned.fetch(f"http://rebind.test:{port}/pin", max_bytes=1000, timeout=5)
    assert result.content == b"hello /pin" and answers == ["rebind.test"]
    assert Handler.seen == [("/pin", f"rebind.test:{port}")]


async def test_size_and_time_are_capped(server: str) -> None:
    allowed = client("127.0.0.1/32")
    with pytest.raises(ResponseTooLargeError):
        await allowed.fetch(f"{server}/big", max_bytes=100_000, timeout=5)
    with pytest.raises(TransientError, match="longer than"):  # how soon: bench/suite_timings.py
        await allowed.fetch(f"{server}/slow", max_bytes=1000, timeout=0.5)


def test_policy_allows_public_addresses() -> None:
    policy = OutboundPolicy()
    assert policy.refusal("93.184.216.34") is None and policy.refusal("2606:2800:220:1::") is None
    assert OutboundPolicy("10.0.0.0/8").refusal("10.2.3.4") is None
