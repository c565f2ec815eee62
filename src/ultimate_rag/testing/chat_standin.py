"""A STAND-IN for a language model: a small HTTP server that speaks the OpenAI chat completions
protocol (JSON and streamed server-sent events) but generates nothing. It replies what the test
scripted, so that protocol cases can be checked exactly: streaming and not, 5xx, 429 with
Retry-After, stalls, slow pieces, a client that disconnects mid-answer. It is not a model; the
end-to-end tests with a real one use llama.cpp (``llm_servers.LlamaCppChatServer``).

    python -m ultimate_rag.testing.chat_standin --port 8089

Control (for the test that started it):
  POST /_control/script  [step, ...]  each chat request takes the next step (then the default)
  GET  /_control/state   {"requests": [...], "cancelled": n}  what was asked, and how many streams
                                                                 the client abandoned
A step: {"reply": text, "delay": s between pieces} | {"status": 503, "retry_after": "2"} |
{"stall": seconds} (then the connection is closed) | {"hold": true, "reply": first piece} (streams
the piece, then waits until the client goes away) | {"break": true, "reply": text} (streams the
text, then drops the connection without ending the response). A 4xx step echoes the Authorization header it
got in its error body, as careless providers do, so tests can check the key never leaks further.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "stand-in (not a language model)"
DEFAULT_REPLY = "[stand-in] The passages say so [1]."


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.cancelled = 0

    def next_step(self, record: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(record)
            return self.script.pop(0) if self.script else {}


def _pieces(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text) or [""]


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            headers = {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/_control/state":
                with state.lock:
                    self._json(200, {"requests": state.requests, "cancelled": state.cancelled})
            elif self.path.endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path == "/_control/script":
                with state.lock:
                    state.script = list(body)
                    state.requests.clear()
                    state.cancelled = 0
                self._json(200, {"ok": True})
                return
            if not self.path.endswith("/chat/completions"):
                self._json(404, {"error": {"message": "not found"}})
                return
            auth = self.headers.get("Authorization", "")
            step = state.next_step({"body": body, "authorization": auth})
            if "stall" in step:
                time.sleep(float(step["stall"]))
                self.close_connection = True
                return
            status = int(step.get("status", 200))
            if status != 200:
                headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else {}
                self._json(status, {"error": {"message": f"stand-in error {status}; you sent {auth!r}"}}, headers)
                return
            if "body" in step:
                self._json(200, step["body"])
                return
            if "chunks" in step:
                self._raw_stream(step["chunks"])
                return
            reply = str(step.get("reply", DEFAULT_REPLY))
            if body.get("stream"):
                self._stream(reply, step)
            else:
                self._json(200, {"id": "standin", "object": "chat.completion", "model": MODEL, "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": len(_pieces(reply))}})

        def _send_event(self, value: Any) -> None:
            data = f"data: {json.dumps(value) if not isinstance(value, str) else value}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _raw_stream(self, chunks: list[Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in [*chunks, "[DONE]"]:
                self._send_event(chunk)
            self.wfile.write(b"0\r\n\r\n")

        def _stream(self, reply: str, step: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            pieces = _pieces(reply)
            try:
                for piece in pieces:
                    self._send_event({"object": "chat.completion.chunk", "model": MODEL,
                                      "choices": [{"index": 0, "delta": {"content": piece}}]})
                    if step.get("delay"):
                        time.sleep(float(step["delay"]))
                if step.get("break"):  # the connection drops mid-answer
                    self.close_connection = True
                    return
                if step.get("hold"):
                    while True:  # until writing fails: the client went away
                        time.sleep(0.05)
                        comment = b": keep-alive\n\n"
                        self.wfile.write(f"{len(comment):x}\r\n".encode() + comment + b"\r\n")
                        self.wfile.flush()
                self._send_event({"object": "chat.completion.chunk", "model": MODEL, "choices": [],
                                  "usage": {"prompt_tokens": 11, "completion_tokens": len(pieces)}})
                self._send_event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                with state.lock:
                    state.cancelled += 1
                self.close_connection = True

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description="A stand-in OpenAI chat completions server (not a model).")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(State()))
    server.daemon_threads = True
    print(f"stand-in chat server (not a language model) on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
