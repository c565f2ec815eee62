"""Files the server refused, remembered on this machine so that a rerun of ``ingest`` does not send
them again while their bytes are the same: a JSON file under ``$ULTIMATE_RAG_STATE_DIR`` (default
``$XDG_STATE_HOME/ultimate-rag``, i.e. ``~/.local/state/ultimate-rag``), keyed by server and
knowledge base, then by the file's sha256. Only refusals that follow from the bytes are kept (415
unsupported or unreadable format, 413 too large, 422 a file the server cannot use); a refusal of
the moment (503, a broken connection) is not. ``--retry-refused`` sends them again (say, after the
server learnt a format or its size limit was raised). A state file that cannot be read or written
never stops an ingest: it is then as if nothing had been refused before."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REMEMBERED_STATUSES = frozenset({413, 415, 422})
# a 422 that names the upload's own fields (its path in the folder, --metadata) is about the
# request, not the bytes: the same file with other fields may go in
REQUEST_FIELDS = ("path", "metadata")
MAX_PER_KNOWLEDGE_BASE = 100_000  # the oldest are forgotten first


def follows_from_bytes(status: int, reason: str) -> bool:
    """Whether a refusal is the file's own (kept for the next run)."""
    return status in REMEMBERED_STATUSES and not (status == 422 and reason.startswith(REQUEST_FIELDS))


def state_dir() -> Path:
    if os.environ.get("ULTIMATE_RAG_STATE_DIR"):
        return Path(os.environ["ULTIMATE_RAG_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ultimate-rag"


@dataclass(frozen=True)
class Refusal:
    reason: str
    status: int
    file: str  # the file as it was named when refused
    at: str


class RefusedFiles:
    """The refusals of one knowledge base on one server."""

    def __init__(self, server: str, knowledge_base_id: str, path: Path | None = None) -> None:
        self.path = path or state_dir() / "ingest-refused.json"
        self.scope = f"{server.rstrip('/')} {knowledge_base_id}"
        self.problem: str | None = None  # why the state file could not be used, if it could not
        self._all = self._read()
        self.known: dict[str, Refusal] = {
            sha: Refusal(str(r.get("reason", "")), int(r.get("status", 0)), str(r.get("file", "")),
                         str(r.get("at", "")))
            for sha, r in self._all.get(self.scope, {}).items() if isinstance(r, dict)}

    def get(self, sha256: str) -> Refusal | None:
        return self.known.get(sha256)

    def remember(self, sha256: str, file: str, status: int, reason: str) -> None:
        if follows_from_bytes(status, reason):
            self.known[sha256] = Refusal(reason, status, file, datetime.now(UTC).isoformat(timespec="seconds"))

    def forget(self, sha256: str) -> None:
        self.known.pop(sha256, None)

    def save(self) -> None:
        newest = sorted(self.known.items(), key=lambda kv: kv[1].at)[-MAX_PER_KNOWLEDGE_BASE:]
        self._all = self._read()  # another run may have saved its knowledge base's meanwhile: keep it
        scoped = {sha: {"reason": r.reason, "status": r.status, "file": r.file, "at": r.at} for sha, r in newest}
        if scoped:
            self._all[self.scope] = scoped
        else:
            self._all.pop(self.scope, None)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".ingest-refused-", dir=self.path.parent)
            with os.fdopen(fd, "w") as fh:
                json.dump(self._all, fh, ensure_ascii=False, indent=1)
            os.replace(tmp, self.path)  # whole or not at all: a killed run never leaves half a file
        except OSError as exc:
            self.problem = f"could not write {self.path}: {exc.strerror or exc}"

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.problem = f"could not read {self.path}: {exc}"
            return {}
        return data if isinstance(data, dict) else {}
