"""What ``ingest`` will do with each local file: walk the paths, hash the files, and compare with the
documents the knowledge base already has. Bytes it already holds are skipped (sha256); a file whose
path (relative to the folder given) matches a document with other bytes replaces that document's
content; the rest are new. So an interrupted run, run again, uploads only what did not arrive.

A file is uploaded with its path in the folder given, the folder's name first (``docs/guides/setup.md``
for ``ingest docs``; a file named alone, its name), which the server keeps as the document's
metadata ``source.path``: files of the same name in different folders stay apart, and a changed
file replaces the document it was, not one of the same name."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from ..client import Document

NEW, UPDATE, UNCHANGED = "new", "updated", "unchanged"


@dataclass
class LocalFile:
    path: Path
    shown: str  # the path as the user gave it (for output)
    size: int
    sha256: str = ""
    relative: str = ""  # where it lies in the folder given (the folder's name first): the document's source.path

    @property
    def label(self) -> str:
        """How output names it: its path in the folder, or the path given."""
        return self.relative or self.shown


@dataclass
class Step:
    file: LocalFile
    action: str  # NEW, UPDATE or UNCHANGED
    document: Document | None = None  # the document replaced (UPDATE) or already holding the bytes
    note: str = ""


def collect(paths: Iterable[str], include: list[str] | None, exclude: list[str] | None) -> list[LocalFile]:
    """Files named, and the files under folders (hidden ones and non-regular files left out)."""
    found: dict[Path, LocalFile] = {}
    for given in paths:
        root = Path(given)
        if root.is_file():
            candidates: Iterator[tuple[Path, str]] = iter([(root, root.name)])
            prefix = ""
        elif root.is_dir():
            candidates = _walk(root)
            prefix = f"{root.resolve().name}/" if root.resolve().name else ""
        else:
            raise FileNotFoundError(f"{given}: no such file or folder")
        for path, rel in candidates:
            if include and not any(_matches(rel, g) for g in include):
                continue
            if exclude and any(_matches(rel, g) for g in exclude):
                continue
            real = path.resolve()
            if real not in found and path.is_file():
                found[real] = LocalFile(path=path, shown=str(path), size=path.stat().st_size, relative=prefix + rel)
    return list(found.values())


def _walk(root: Path) -> Iterator[tuple[Path, str]]:
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if not name.startswith("."):
                path = Path(folder, name)
                yield path, path.relative_to(root).as_posix()


def _matches(rel: str, pattern: str) -> bool:
    return fnmatch(rel, pattern) or fnmatch(rel.rsplit("/", 1)[-1], pattern)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def plan(files: list[LocalFile], existing: list[Document]) -> list[Step]:
    live = [d for d in existing if d.status != "DELETED"]
    by_sha: dict[str, Document] = {}
    for d in sorted(live, key=lambda d: d.status != "READY"):  # prefer a READY holder
        by_sha.setdefault(d.sha256, d)
    local_shas = {f.sha256 for f in files}
    replaceable: dict[str, list[Document]] = {}
    for d in live:  # documents whose bytes no local file has: the ones a changed file may replace
        if d.sha256 not in local_shas:
            replaceable.setdefault(_key_of_document(d), []).append(d)
    steps: list[Step] = []
    seen: dict[str, LocalFile] = {}
    for f in files:
        target = next((replaceable[k] for k in _keys_of_file(f) if replaceable.get(k)), None)
        if f.sha256 in by_sha:
            steps.append(Step(f, UNCHANGED, by_sha[f.sha256]))
        elif f.sha256 in seen:
            steps.append(Step(f, UNCHANGED, note=f"same bytes as {seen[f.sha256].label}"))
        elif target:
            steps.append(Step(f, UPDATE, target.pop(0)))
        else:
            steps.append(Step(f, NEW))
        seen.setdefault(f.sha256, f)
    return steps


def _key_of_document(d: Document) -> str:
    return f"path:{d.source_path}" if d.source_path else f"name:{d.filename}"


def _keys_of_file(f: LocalFile) -> list[str]:
    """A file replaces the document with its path, or else (a document uploaded before paths were
    kept) one of its name that has no path."""
    return [f"path:{f.relative}", f"name:{f.path.name}"] if f.relative else [f"name:{f.path.name}"]
