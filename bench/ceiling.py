"""The pipeline's ceiling: ``bench.ingest --embedder zero``. Vectors cost nothing (a fixed unit
vector, returned at once, the way a fast remote GPU server would look from here); every other step
is the product's own and durable: HTTP upload, object storage, PostgreSQL, the queue, parse
children, the chunker with the model's tokenizer, the embedding engine, pgvector.

Compared, in the same run, with LlamaIndex's in-memory ``IngestionPipeline`` on the same corpus
with the same zero-cost embedder (``bench/llamaindex_zero.py``, run in its own virtualenv: see
``bench/requirements-llamaindex.txt``)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ultimate_rag.adapters.embedders.local import MODEL_NAME, LocalE5Embedder

HERE = Path(__file__).resolve().parent
LLAMAINDEX_PYTHON = HERE / "out" / "llamaindex-venv" / "bin" / "python"


class ZeroEmbedder:
    """The local model's name, size and tokenizer (so the knowledge base, the chunks and the token
    counts are exactly those of a real run); its vectors are free."""

    name = MODEL_NAME
    dimension = 384
    max_tokens = 512

    def __init__(self) -> None:
        self._tokenizer = LocalE5Embedder()
        self._vector = [1.0] + [0.0] * (self.dimension - 1)  # unit length: cosine is defined
        self.calls = 0

    def count_tokens(self, text: str) -> int:
        return self._tokenizer.count_tokens(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector] * len(texts)

    async def embed_query(self, text: str) -> list[float]:
        return self._vector


async def stage_breakdown(db) -> str:
    """Mean seconds each document spent in each stage (from the stamps the database wrote)."""
    rows = await db.fetchall("SELECT stage_timings FROM documents WHERE status = 'READY'")
    totals: dict[str, float] = {}
    for row in rows:
        stamps = sorted((datetime.fromisoformat(str(v)), k) for k, v in dict(row["stage_timings"]).items())
        for (t0, stage), (t1, _) in itertools.pairwise(stamps):
            totals[stage] = totals.get(stage, 0.0) + (t1 - t0).total_seconds()
    n = max(1, len(rows))
    return ", ".join(f"{stage} {1000 * total / n:.0f} ms" for stage, total in totals.items())


WORD_COUNTS = HERE.parent / "src" / "ultimate_rag" / "adapters" / "embedders" / "word_counts.py"


def run_llamaindex(python: Path, per_lang: int, chunk_size: int, overlap: int, *,
                   word_memo: bool = False) -> dict[str, float] | None:
    """LlamaIndex on the same corpus in its own interpreter; None when its venv is missing.
    ``word_memo``: its splitter counts tokens the way our chunker does (the model's counts from
    memoized word shares, ``word_counts.py``), so that the comparison does not credit us for
    counting faster what LlamaIndex would count faster too."""
    if not python.exists():
        print(f"LlamaIndex side skipped: {python} not found (see bench/requirements-llamaindex.txt)")
        return None
    corpus = os.environ.get("ULTIMATE_RAG_CORPUS") or str(HERE.parent.parent / "shared" / "bench" / "corpus.py")
    # -P: bench/ is not put on the path (bench/queue.py would shadow the standard library)
    out = subprocess.run([str(python), "-P", str(HERE / "llamaindex_zero.py"), "--corpus", corpus,
                          "--per-lang", str(per_lang), "--chunk-size", str(chunk_size), "--overlap", str(overlap),
                          *(["--word-memo", str(WORD_COUNTS)] if word_memo else [])],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
    return json.loads(out.stdout.strip().splitlines()[-1])
