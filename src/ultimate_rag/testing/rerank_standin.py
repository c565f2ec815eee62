"""A STAND-IN for a reranker: a small HTTP server that speaks the ``/v1/rerank`` protocol (Cohere's
and Jina's request; Cohere's answer, or TEI's with ``shape: tei``) but is no cross-encoder: it
scores a document by how many of the query's terms it contains (domain/lexical.py), and its
answers name it ``stand-in (not a cross-encoder)``. No real reranker can run on the test machine
(no cross-encoder weights ship in a package here); this one lets the protocol, the order it
imposes, timeouts, retries and errors be checked exactly.

The test that starts it (``RerankStandIn().start()``, in a thread) scripts it directly:
``script``: each request takes the next step — ``{"status": 503}``, ``{"stall": seconds}``,
``{"shape": "tei"}`` — then answers normally; ``requests``: what was asked (body and
Authorization header). A 4xx step echoes the Authorization header in its body, as careless
providers do, so tests can check the key never leaks further.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..domain.lexical import terms

MODEL = "stand-in (not a cross-encoder)"


def overlap(query: str, document: str) -> float:
    wanted = set(terms(query))
    return len(wanted & set(terms(document))) / max(1, len(wanted))


class RerankStandIn:
    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RerankStandIn:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _next(self, record: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(record)
            return self.script.pop(0) if self.script else {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _json(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                auth = self.headers.get("Authorization")
                step = standin._next({"path": self.path, "body": body, "authorization": auth})
                if self.path != "/v1/rerank":
                    self._json(404, {"error": f"no route {self.path}"})
                    return
                if "stall" in step:
                    time.sleep(float(step["stall"]))
                if step.get("status"):
                    self._json(int(step["status"]), {"error": "scripted failure", "authorization": auth})
                    return
                scores = [overlap(body["query"], document) for document in body["documents"]]
                ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
                if step.get("shape") == "tei":
                    self._json(200, [{"index": i, "score": scores[i]} for i in ranked])
                else:
                    self._json(200, {"model": MODEL, "results": [{"index": i, "relevance_score": scores[i]}
                                                                 for i in ranked]})

        return Handler
