"""Ingestion throughput on the shared corpus: documents uploaded through the HTTP API (a real
``ultimate-rag serve`` process) by a client in its own process (``bench/uploader.py``), processed
by the product's worker (in this process, so the time spent inside the embedder can be read), wall
time until every document is READY.

Reports: pipeline overhead = 1 - embedder time / wall time; the model alone on the very same
chunk texts in the same run (its best rate: one text per call, on the engine's model threads, with
their thread count; dense, plus the sparse head's pass when it is enabled), timed once before the
ingest and once after it, so that a machine drifting during the run moves both sides alike (the
ratio uses their mean); and re-ingest of the unchanged corpus (reindex of every document: the
embedding cache means nothing is embedded again).

``--embedder zero``: the pipeline's ceiling (vectors at no cost, every other step real and
durable), side by side with LlamaIndex's in-memory IngestionPipeline (``bench/ceiling.py``);
``--worker-processes N`` runs the worker as N processes of its own (``bench/zero_worker.py``), the
way ``ultimate-rag up`` does (two by default), instead of in this process.

    .venv/bin/python -m bench.ingest [--per-lang 40] [--concurrency 3] [--no-sparse]
    .venv/bin/python -m bench.ingest --embedder zero --per-lang 100 [--profile out.prof]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from uuid import uuid4

import httpx
import psutil

from ultimate_rag.adapters.chunking.chunker import StructuredChunker
from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import DocumentSource
from ultimate_rag.services.job_loop import IngestionWorker, WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.worker import model_first, run_event_loop

from .ceiling import LLAMAINDEX_PYTHON, ZeroEmbedder, run_llamaindex, stage_breakdown
from .common import fresh_database, load_corpus, machine, wait_for_documents

ADMIN_KEY = "bench-admin-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_api(url: str, data_dir: Path, port: int, sparse: bool = True) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ULTIMATE_RAG_DATABASE_URL": url, "ULTIMATE_RAG_DATA_DIR": str(data_dir),
           "ULTIMATE_RAG_ADMIN_KEY": ADMIN_KEY, "ULTIMATE_RAG_LOG_LEVEL": "WARNING",
           "ULTIMATE_RAG_SPARSE_ENABLED": "true" if sparse else "false"}
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the API did not start")


CPU_SPENT: list[tuple[float, float]] = []  # per round: (the machine's busy CPU seconds, this process's)
SERVERS_CPU: list[tuple[float, float]] = []  # per round: (the API process's CPU seconds, PostgreSQL's)
API_PID: list[int] = []
WORKER_PIDS: list[int] = []  # the worker processes (--worker-processes); none: the worker runs in this process
UPLOADER_CPU: list[float] = []  # the upload client's own CPU seconds (bench/uploader.py)


async def start_uploader(base: str, kb: str, docs: list[dict], parallel: int, root: Path) -> asyncio.subprocess.Process:
    """The upload client, in its own process (``bench/uploader.py``), ready and waiting for the go."""
    docs_file = root / "upload-docs.json"
    docs_file.write_text(json.dumps([{"id": d["id"], "text": d["text"]} for d in docs]), encoding="utf-8")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.uploader", base, ADMIN_KEY, kb, "--docs", str(docs_file),
        "--parallel", str(parallel), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    if (await proc.stdout.readline()).strip() != b"ready":
        raise SystemExit("the upload client did not start")
    return proc


async def run_uploader(proc: asyncio.subprocess.Process) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"go\n")
    await proc.stdin.drain()
    line = await proc.stdout.readline()
    if await proc.wait() != 0 or not line:
        raise SystemExit("the upload client failed")
    return dict(json.loads(line))


async def ingest_round(container, worker: IngestionWorker | None, requests) -> float:
    """Start the worker (``None``: the worker processes of ``WORKER_PIDS`` run already), fire the
    requests, return the wall time until everything is READY (and note the CPU the round took: the
    whole machine's, and the worker's: this process, or the worker processes)."""
    stop = asyncio.Event()
    machine_before, workers_before, servers_before = _busy_cpu(), _workers_cpu(), _servers_cpu()
    started = time.perf_counter()
    run = asyncio.create_task(worker.run(stop)) if worker is not None else None
    count = await requests()
    await wait_for_documents(container, lambda r: r["ready"] == count, interval=0.05)
    elapsed = time.perf_counter() - started
    CPU_SPENT.append((_busy_cpu() - machine_before, _workers_cpu() - workers_before))
    (api_after, postgres_after), (api_before, postgres_before) = _servers_cpu(), servers_before
    SERVERS_CPU.append((api_after - api_before, postgres_after - postgres_before))
    stop.set()
    if run is not None:
        await run
    return elapsed


async def start_workers(url: str, data_dir: Path, processes: int, concurrency: int) -> list[asyncio.subprocess.Process]:
    """``processes`` worker processes (``bench/zero_worker.py``), each ready before the clock starts."""
    procs = []
    for _ in range(processes):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.zero_worker", url, str(data_dir), "--concurrency", str(concurrency),
            stdout=asyncio.subprocess.PIPE)
        procs.append(proc)
    for proc in procs:
        assert proc.stdout is not None
        if (await proc.stdout.readline()).strip() != b"ready":
            raise SystemExit("a worker process did not start")
        WORKER_PIDS.append(proc.pid)
    return procs


async def stop_workers(procs: list[asyncio.subprocess.Process]) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.terminate()
    for proc in procs:
        await proc.wait()


def _workers_cpu() -> float:
    """CPU seconds so far of the worker: the worker processes, or this process when it holds the worker."""
    if not WORKER_PIDS:
        return time.process_time()
    return sum(_cpu_of(psutil.Process(pid)) for pid in WORKER_PIDS)


def _cpu_of(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def _busy_cpu() -> float:
    """CPU seconds the machine spent on anything but idling, all cores together (/proc/stat)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def _servers_cpu() -> tuple[float, float]:
    """CPU seconds so far of the API process and of PostgreSQL's processes (a backend that ended
    meanwhile is not counted: the worker's pools keep theirs for the whole round)."""
    api = sum(_cpu_of(psutil.Process(pid)) for pid in API_PID)
    postgres = sum(_cpu_of(p) for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres")
    return api, postgres


def _worker_where() -> str:
    return f"the {len(WORKER_PIDS)} worker processes" if WORKER_PIDS else "the worker (this process)"


def cpu_line(docs: int, wall: float) -> str:
    machine_cpu, worker_cpu = CPU_SPENT[0]
    return (f"CPU in the first round: {machine_cpu:.1f} core-s of {wall * (os.cpu_count() or 1):.1f} available "
            f"({1000 * machine_cpu / docs:.1f} ms per document, all processes: worker, API, PostgreSQL, parse "
            f"children, anything else running); {_worker_where()} {worker_cpu:.1f} s "
            f"({1000 * worker_cpu / docs:.1f} ms per document, at most one core's worth on each event loop); "
            f"the upload client {UPLOADER_CPU[0]:.1f} s ({1000 * UPLOADER_CPU[0] / docs:.1f} ms per document, "
            f"its own process); the API process {SERVERS_CPU[0][0]:.1f} s ({1000 * SERVERS_CPU[0][0] / docs:.1f} ms "
            f"per document); PostgreSQL {SERVERS_CPU[0][1]:.1f} s ({1000 * SERVERS_CPU[0][1] / docs:.1f} ms per document)")


async def main_async(args: argparse.Namespace) -> None:
    corpus = load_corpus()
    docs = corpus.make_corpus(per_lang=args.per_lang)
    total_chars = sum(len(d["text"]) for d in docs)
    url, server, root = fresh_database()
    data_dir = root / "data"
    port = free_port()
    zero = args.embedder == "zero"
    sparse_on = not (zero or args.no_sparse)  # the zero-cost run has no model pass at all
    api = start_api(url, data_dir, port, sparse_on)
    API_PID.append(api.pid)
    workers: list[asyncio.subprocess.Process] = []
    try:
        settings = Settings(database_url=url, data_dir=data_dir, admin_key=ADMIN_KEY,  # the product's poll interval
                            sparse_enabled=sparse_on, worker_model_precedence=args.precedence)
        container = build(settings, url=url, embedder=ZeroEmbedder() if zero else None)
        await container.open()
        model_first(container, settings)  # as the worker process does
        workers.extend(await start_workers(url, data_dir, args.worker_processes, args.concurrency))
        worker = None if workers else container.worker(WorkerConfig(  # else the worker processes do the work
            concurrency=args.concurrency, heartbeat_seconds=10, poll_interval_seconds=settings.poll_interval_seconds))
        base = f"http://127.0.0.1:{port}/api"
        h = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with httpx.AsyncClient(headers=h, timeout=60) as client:
            kb = (await client.post(f"{base}/knowledge-bases", json={"name": "bench"})).json()["id"]
            container.embedding.embedder.count_tokens("warm up")  # load the model before the clock starts

            uploads_done = 0.0
            uploader = await start_uploader(base, kb, docs, args.uploads, root)

            async def upload_all() -> int:
                nonlocal uploads_done
                report = await run_uploader(uploader)
                uploads_done = report["seconds"]
                UPLOADER_CPU.append(report["cpu"])
                return int(report["uploaded"])

            before = None if zero or args.wall_only else model_alone(container, chunk_texts(container, docs))
            profiler = None
            if args.profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            wall = await ingest_round(container, worker, upload_all)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(args.profile)
            embed_seconds = container.embedding.service.seconds_in_embedder
            chunks = await container.infra.db.fetchall("SELECT content FROM chunks ORDER BY document_id, ordinal")
            ids = [r["id"] for r in await container.infra.db.fetchall("SELECT id FROM documents")]

            async def reindex_all() -> int:
                for doc_id in ids:
                    (await client.post(f"{base}/documents/{doc_id}/reindex")).raise_for_status()
                return len(ids)

            container.embedding.service.seconds_in_embedder = 0.0
            rewall = await ingest_round(container, worker, reindex_all)
            re_embed = container.embedding.service.seconds_in_embedder

        texts = [r["content"] for r in chunks]  # as stored (the model-alone passes use what was embedded)
        print(f"machine: {machine()}")
        print(f"uploads: {len(docs)} through the API, {args.uploads} at a time, the last accepted after "
              f"{uploads_done:.1f} s")
        print(f"corpus: {len(docs)} documents ({args.per_lang} per language), {total_chars:,} characters, "
              f"{len(texts)} chunks; worker concurrency {args.concurrency}; embedder {args.embedder}, "
              f"sparse {'on' if sparse_on else 'off'}")
        if zero:
            await report_ceiling(args, wall, rewall, len(texts), total_chars, container, len(docs))
        elif args.wall_only:
            print(f"RESULT ingest: wall {wall:.1f} s until all READY, {len(texts) / wall:.2f} chunks/s; "
                  f"re-ingest {rewall:.2f} s")
        else:
            assert before is not None
            report_model(container, texts, before, wall, embed_seconds, rewall, re_embed, total_chars,
                         args.precedence)
        await container.close()
    finally:  # a failed run leaves no worker or API process or database behind
        await stop_workers(workers)
        api.terminate()
        api.wait(timeout=30)
        server.cleanup()  # type: ignore[attr-defined]


async def report_ceiling(args: argparse.Namespace, wall: float, rewall: float, chunks: int, total_chars: int,
                         container, total_docs: int) -> None:
    engine = container.embedding.embedder.engine
    print(f"RESULT ceiling (zero-cost embedder): wall {wall:.2f} s until all READY, {chunks / wall:.1f} chunks/s, "
          f"{total_chars / wall:,.0f} corpus chars/s; " + (
              f"engine batches {engine.batches} ({engine.mixed_batches} mixing jobs)" if not WORKER_PIDS
              else f"{len(WORKER_PIDS)} worker processes"))
    print(f"per document, mean time in each stage: {await stage_breakdown(container.infra.db)}")
    print(cpu_line(total_docs, wall))
    print(f"RESULT ceiling re-ingest of the unchanged corpus: {rewall:.2f} s ({100 * rewall / wall:.1f} %)")
    theirs = run_llamaindex(Path(args.llamaindex_python), args.per_lang, container.settings.chunk_size_tokens,
                            container.settings.chunk_overlap_tokens)
    if theirs is not None:
        print(f"RESULT LlamaIndex IngestionPipeline (in memory, same corpus, zero-cost embedder): "
              f"{theirs['wall']:.2f} s, {theirs['nodes']} nodes, {theirs['chunks_per_s']:.1f} chunks/s; "
              f"unchanged re-run {theirs['rerun_wall']:.3f} s")
        print(f"RESULT ceiling ratio: ours / LlamaIndex = {chunks / wall / theirs['chunks_per_s']:.2f}x "
              f"(chunks/s, durable vs in memory)")
    memo = run_llamaindex(Path(args.llamaindex_python), args.per_lang, container.settings.chunk_size_tokens,
                          container.settings.chunk_overlap_tokens, word_memo=True)
    if memo is not None:
        print(f"RESULT LlamaIndex IngestionPipeline counting as our chunker does (word shares): {memo['wall']:.2f} s, "
              f"{memo['nodes']} nodes, {memo['chunks_per_s']:.1f} chunks/s")
        print(f"RESULT ceiling ratio, the same token counting on both sides: ours / LlamaIndex = "
              f"{chunks / wall / memo['chunks_per_s']:.2f}x")


def chunk_texts(container, docs: list[dict]) -> list[str]:
    """What the pipeline will embed, made the pipeline's way (its parser and chunker, the model's
    tokenizer), before anything is ingested; checked against the stored chunks afterwards."""
    settings = container.settings
    chunker = StructuredChunker(container.embedding.embedder.count_tokens)
    texts: list[str] = []
    for d in docs:
        ident = uuid4()
        source = DocumentSource(ident, f"{d['id']}.txt", "text/plain", d["text"].encode())
        parsed = container.infra.parsers.resolve(source).parse(source)
        texts += [c.embedding_text for c in chunker.split(
            parsed, document_id=ident, knowledge_base_id=ident, revision=1,
            chunk_size=settings.chunk_size_tokens, overlap=settings.chunk_overlap_tokens)]
    return texts


def model_alone(container, texts: list[str]) -> tuple[list[str], float, float]:
    """The model on ``texts`` with nothing else running: seconds for the dense vectors alone, and
    for the dense and sparse vectors together (the pipeline's call with the sparse head on: one
    pass with the single-pass encoder; 0 when off). On the engine's own model threads, at their
    priority, each copy of the model taking its share of the texts one at a time (the engine's
    layout). With the sparse head on, each text is timed both ways back to back (dense, then
    both), so that a machine whose speed drifts moves the two sides alike; each side's seconds
    are the time its calls took, summed over the copies and divided by their number."""
    model_thread = container.embedding.embedder.model_thread
    model_thread.start()
    sparse = container.embedding.service.sparse
    copies = model_thread.copies

    def share(part: list[str]) -> tuple[float, float]:
        model = model_thread.model()
        dense = pair = 0.0
        for text in part:
            t = time.perf_counter()
            model.passage([text])
            dense += time.perf_counter() - t
            if sparse is not None:
                t = time.perf_counter()
                sparse.inner.pairs_with_model(model, [text])
                pair += time.perf_counter() - t
        return dense, pair

    shares = [f.result() for f in [model_thread.executor().submit(share, texts[i::copies]) for i in range(copies)]]
    return texts, sum(d for d, _ in shares) / copies, sum(p for _, p in shares) / copies


def report_model(container, stored: list[str], before: tuple[list[str], float, float], wall: float,
                 embed_seconds: float, rewall: float, re_embed: float, total_chars: int, precedence: int) -> None:
    texts, dense_before, pair_before = before
    if len(texts) != len(stored):
        raise SystemExit(f"the chunks made before the run ({len(texts)}) are not those stored ({len(stored)})")
    _, dense_after, pair_after = model_alone(container, texts)
    dense_alone, pair_alone = (dense_before + dense_after) / 2, (pair_before + pair_after) / 2
    alone = pair_alone or dense_alone
    model_thread = container.embedding.embedder.model_thread
    print(f"model alone before the ingest {pair_before or dense_before:.1f} s, after it "
          f"{pair_after or dense_after:.1f} s (the mean below)")
    print(f"model threads: {model_thread.threads} ({model_thread.copies} copies of the model, "
          f"{model_thread.team} threads each); the worker's own steps at nice +{precedence} below them")
    print(f"RESULT ingest: wall {wall:.1f} s until all READY, {len(texts) / wall:.2f} chunks/s, "
          f"{total_chars / wall:,.0f} corpus chars/s")
    print(f"RESULT ingest: time inside the embedder {embed_seconds:.1f} s; pipeline overhead "
          f"{100 * (1 - embed_seconds / wall):.1f} %")
    print(f"RESULT embedder alone (same chunks, batch 1): dense {dense_alone:.1f} s, dense and sparse "
          f"{pair_alone:.1f} s, {len(texts) / alone:.2f} chunks/s; pipeline reaches {100 * alone / wall:.1f} % of "
          f"the embedder's best rate")
    if pair_alone:
        extra = pair_alone - dense_alone
        print(f"RESULT sparse vectors add {1000 * extra / len(texts):.1f} ms per chunk to "
              f"{1000 * dense_alone / len(texts):.1f} ms for the dense one (+{100 * extra / dense_alone:.0f} %)")
    print(f"RESULT re-ingest of the unchanged corpus: {rewall:.2f} s ({100 * rewall / wall:.1f} % of the first "
          f"ingest), {re_embed:.2f} s in the embedder")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-lang", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--uploads", type=int, default=1, help="uploads in flight at once")
    parser.add_argument("--embedder", choices=("local", "zero"), default="local")
    parser.add_argument("--no-sparse", action="store_true", help="without the learned sparse head's pass")
    parser.add_argument("--precedence", type=int, default=Settings().worker_model_precedence,
                        help="ULTIMATE_RAG_WORKER_MODEL_PRECEDENCE: how much nicer the worker's own steps run than "
                             "the local model's threads (0: equal)")
    parser.add_argument("--worker-processes", type=int, default=0,
                        help="with --embedder zero: this many worker processes (bench/zero_worker.py, each with "
                             "--concurrency job slots) instead of the worker in this process")
    parser.add_argument("--profile", help="write a cProfile of this process (the worker) to this file")
    parser.add_argument("--wall-only", action="store_true",
                        help="the ingest's wall time only, without timing the model alone before and after it "
                             "(shorter runs, to alternate modes on a busy machine)")
    parser.add_argument("--llamaindex-python", default=str(LLAMAINDEX_PYTHON))
    args = parser.parse_args()
    if args.worker_processes and args.embedder != "zero":
        parser.error("--worker-processes needs --embedder zero (the model's time is read in this process)")
    run_event_loop(main_async(args))  # the worker process's own loop


if __name__ == "__main__":
    main()
