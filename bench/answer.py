"""Latency of grounded answers on the shared corpus: what the answer endpoint adds to the provider's
own time, for the time to first token and the whole answer.

A real ``ultimate-rag serve`` process answers ``POST …/answer`` with ``stream: true`` over HTTP;
for every question the same grounded prompt (built here by the product's own ``prepare``) is also
sent straight to the provider, so the difference is what the product adds: retrieval (query
embedding, vector search, READY filter), prompt building, the citation filter and the SSE relay.
Providers: the stand-in (no generation: the product's overhead alone) and the real
SmolLM2-135M-Instruct through llama.cpp with one thread (when installed; see scripts/test.sh).

    ULTIMATE_RAG_CORPUS=/path/to/corpus.py .venv/bin/python -m bench.answer [--per-lang 10] [--questions 30]
        [--model-questions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx

from ultimate_rag.bootstrap import build
from ultimate_rag.domain.models import KnowledgeBaseSettings
from ultimate_rag.services.grounding import answer_messages
from ultimate_rag.services.job_loop import WorkerConfig
from ultimate_rag.settings import Settings
from ultimate_rag.testing.llm_servers import LlamaCppChatServer, StandInChatServer, llama_runtime_missing

from .common import fresh_database, load_corpus, machine
from .ingest import ADMIN_KEY, free_port

CONTEXT_TOKENS, MAX_TOKENS = 600, 64  # one thread on a shared CPU evaluates ~100 prompt tokens/s


def start_api(url: str, data_dir: Path, port: int, llm_url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ULTIMATE_RAG_DATABASE_URL": url, "ULTIMATE_RAG_DATA_DIR": str(data_dir),
           "ULTIMATE_RAG_ADMIN_KEY": ADMIN_KEY, "ULTIMATE_RAG_LOG_LEVEL": "WARNING",
           "ULTIMATE_RAG_LLM_BASE_URL": llm_url, "ULTIMATE_RAG_LLM_MODEL": "bench",
           "ULTIMATE_RAG_LLM_MAX_OUTPUT_TOKENS": str(MAX_TOKENS), "ULTIMATE_RAG_LLM_CONTEXT_TOKENS": str(CONTEXT_TOKENS),
           "ULTIMATE_RAG_ANSWER_MIN_SCORE": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "ultimate_rag.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the API did not start")


async def timed_sse(client: httpx.AsyncClient, url: str, body: dict[str, Any], first_event: str,
                    done: list[dict[str, Any]] | None = None) -> tuple[float, float]:
    """(seconds to the first ``first_event`` frame with text, seconds to the end of the stream); the
    ``done`` frame's data is appended to ``done``."""
    started = time.perf_counter()
    first = None
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif event == "done" and line.startswith("data:") and done is not None:
                done.append(json.loads(line[5:]))
            elif first is None and line.startswith("data:") and (event == first_event or first_event == "*"):
                data = line[5:].strip()
                if data != "[DONE]" and _has_text(json.loads(data)):
                    first = time.perf_counter()
    end = time.perf_counter()
    return (first or end) - started, end - started


def _has_text(frame: Any) -> bool:
    if "text" in frame:
        return bool(frame["text"])
    return any((c.get("delta") or {}).get("content") for c in frame.get("choices") or ())


def questions(docs: list[dict], n: int) -> list[str]:
    """Sentences taken from the corpus itself (so retrieval finds something), every language."""
    corpus = load_corpus()
    rng = random.Random(7)
    picked = []
    for doc in rng.sample(docs, min(n, len(docs))):
        sentences = corpus.split_sentences(doc["text"])
        picked.append(rng.choice(sentences)[:200])
    return picked


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {1000 * statistics.median(values):.1f} ms, p95 {1000 * p95:.1f} ms"


async def measure(name: str, base_url: str, url: str, container: Any, kb: UUID, qs: list[str], top_k: int) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="urag-bench-answer-"))
    port = free_port()
    api = start_api(url, data_dir, port, base_url)
    try:
        api_ttft, api_total, own_ttft, own_total, retrieval = [], [], [], [], []
        done: list[dict[str, Any]] = []
        async with httpx.AsyncClient(timeout=300, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
            endpoint = f"http://127.0.0.1:{port}/api/knowledge-bases/{kb}/answer"
            await timed_sse(client, endpoint, {"question": qs[0], "top_k": top_k, "stream": True}, "delta")  # warm
            for q in qs:
                a_first, a_total = await timed_sse(client, endpoint, {"question": q, "top_k": top_k, "stream": True},
                                                   "delta", done)
                t = time.perf_counter()
                prepared = await container.retrieval.answers.prepare(kb, q, top_k=top_k)  # no model here: passages only
                retrieval.append(time.perf_counter() - t)
                messages = answer_messages(q, prepared.passages)  # the very prompt the API sent
                body = {"model": "bench", "stream": True, "max_tokens": MAX_TOKENS, "temperature": 0.2,
                        "messages": [{"role": m.role, "content": m.content} for m in messages]}
                p_first, p_total = await timed_sse(client, f"{base_url}/chat/completions", body, "*")
                api_ttft.append(a_first)
                api_total.append(a_total)
                own_ttft.append(p_first)
                own_total.append(p_total)
        added_first = [a - p for a, p in zip(api_ttft, own_ttft, strict=True)]
        added_total = [a - p for a, p in zip(api_total, own_total, strict=True)]
        print(f"RESULT answer [{name}]: time to first token through the API {summary(api_ttft)}; "
              f"provider alone {summary(own_ttft)}")
        print(f"RESULT answer [{name}]: added before the first token {summary(added_first)} "
              f"(retrieval + prompt, in-process retrieval alone {summary(retrieval)})")
        server_retrieval = [d["timing"]["retrieval_seconds"] for d in done]
        server_first = [d["timing"]["first_token_seconds"] for d in done if "first_token_seconds" in d["timing"]]
        print(f"RESULT answer [{name}]: inside the API process: retrieval {summary(server_retrieval)}, "
              f"request to first token {summary(server_first)}")
        print(f"RESULT answer [{name}]: whole answer through the API {summary(api_total)}; provider alone "
              f"{summary(own_total)}; added {summary(added_total)}")
    finally:
        api.terminate()
        api.wait(timeout=30)


async def main_async(args: argparse.Namespace) -> None:
    corpus = load_corpus()
    docs = corpus.make_corpus(per_lang=args.per_lang)
    url, server, root = fresh_database()
    settings = Settings(database_url=url, data_dir=root / "data", admin_key=ADMIN_KEY, answer_min_score=0.0,
                        llm_context_tokens=CONTEXT_TOKENS, llm_max_output_tokens=MAX_TOKENS)
    providers: list[tuple[str, Any]] = [("stand-in, no generation", StandInChatServer(root / "standin"))]
    missing = llama_runtime_missing()
    if missing:
        print(f"the real model is skipped: {missing}")
    else:
        providers.append(("SmolLM2-135M llama.cpp 1 thread", LlamaCppChatServer(root / "llama", threads=1)))
    container = build(settings, url=url)
    await container.open()
    try:
        kb = await container.ingest.knowledge_bases.create("bench", "", _kb_settings(container))
        for d in docs:
            await container.ingest.ingestion.submit(kb, f"{d['id']}.txt", "text/plain", d["text"].encode())
        await container.worker(WorkerConfig(concurrency=2, heartbeat_seconds=10)).run_until_idle()
        counted = await container.infra.db.fetchone("SELECT count(*) AS n FROM chunks")
        assert counted is not None
        chunks = counted["n"]
        qs = questions(docs, args.questions)
        print(f"machine: {machine()}")
        print(f"corpus: {len(docs)} documents ({args.per_lang} per language), {chunks} chunks; {len(qs)} questions "
              f"(en/zh/ko sentences of the corpus; {args.model_questions} for the real model), top_k {args.top_k}, "
              f"prompt passages ≤ {CONTEXT_TOKENS} estimated tokens, ≤ {MAX_TOKENS} tokens out, streamed")
        for name, provider in providers:
            provider.start()
            try:
                n = args.questions if isinstance(provider, StandInChatServer) else args.model_questions
                await measure(name, provider.base_url, url, container, kb.id, qs[:n], args.top_k)
            finally:
                provider.stop()
    finally:
        await container.close()
        server.cleanup()  # type: ignore[attr-defined]


def _kb_settings(container: Any) -> KnowledgeBaseSettings:
    return KnowledgeBaseSettings(embedding_model=container.embedding.embedder.name,
                                 embedding_dimension=container.embedding.embedder.dimension)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-lang", type=int, default=10)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--model-questions", type=int, default=8, help="questions asked of the real model")
    parser.add_argument("--top-k", type=int, default=5)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
