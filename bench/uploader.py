"""The ingest benchmarks' load generator, in a process of its own: uploads documents through the
HTTP API with ``--parallel`` requests in flight (a thread each, a kept-alive connection each).
It reads the documents (a JSON list of ``{"id", "text"}``) from ``--docs``, makes their request
bodies, prints ``ready``, and starts when a line arrives on its standard input (so that its start
is not timed); then it prints one JSON line: how many were accepted, the seconds it took, and its
own CPU seconds from the go.

Kept apart from the worker on purpose: a client in the worker's process shares the worker's event
loop and interpreter lock, so its cost (an HTTP client's per-request Python) would be counted as
the pipeline's; in a deployment the clients are other machines. It stays on this machine's cores,
and its CPU is reported, so nothing is hidden. The standard library's ``http.client`` and a
multipart body built once per document keep it as cheap as a client can be.

    python -m bench.uploader http://127.0.0.1:8000/api KEY KB_ID --docs docs.json --parallel 8
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit


def multipart(filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            f"Content-Type: text/plain\r\n\r\n").encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("base")
    parser.add_argument("key")
    parser.add_argument("kb")
    parser.add_argument("--docs", required=True)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    with open(args.docs, encoding="utf-8") as f:
        docs = json.load(f)
    bodies = [multipart(f"{d['id']}.txt", d["text"].encode()) for d in docs]
    target = urlsplit(args.base)
    path = f"{target.path}/knowledge-bases/{args.kb}/documents"
    local = threading.local()

    def upload(body: tuple[bytes, str]) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        conn.request("POST", path, body=body[0],
                     headers={"Authorization": f"Bearer {args.key}", "Content-Type": body[1]})
        response = conn.getresponse()
        answer = response.read()
        if response.status >= 300:
            raise SystemExit(f"upload refused: {response.status} {answer[:200]!r}")

    print("ready", flush=True)
    sys.stdin.readline()
    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(upload, bodies))
    print(json.dumps({"uploaded": len(bodies), "seconds": time.perf_counter() - started,
                      "cpu": time.process_time() - cpu}), flush=True)


if __name__ == "__main__":
    main()
