"""The backends' client libraries (adapters/backends.py): imported the first time a backend is used,
and a missing one is an error that says what to install. A missing library is simulated with
``sys.modules[name] = None`` (Python's own way to make an import fail): they are installed here."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest

from ultimate_rag.adapters.backends import import_backend
from ultimate_rag.adapters.storage.s3 import S3ObjectStorage
from ultimate_rag.adapters.vectors.milvus import MilvusVectorStore
from ultimate_rag.adapters.vectors.qdrant import QdrantVectorStore


def test_an_installed_library_is_the_module_itself() -> None:
    assert import_backend("json", "the test") is json


def test_a_missing_library_names_who_needs_it_and_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "qdrant_client", None)
    with pytest.raises(RuntimeError) as raised:
        import_backend("qdrant_client", "the Qdrant vector store", package="qdrant-client")
    assert str(raised.value) == ("the Qdrant vector store needs qdrant-client: "
                                 "pip install 'ultimate-rag[backends]' (or qdrant-client)")
    assert isinstance(raised.value.__cause__, ImportError)


@pytest.mark.parametrize(("module", "use", "message"), [
    ("boto3", lambda: S3ObjectStorage("bucket"), "S3 storage needs boto3"),
    ("pymilvus", lambda: MilvusVectorStore(uri="http://127.0.0.1:1", dimension=4, model="m")._get(),
     "the Milvus vector store needs pymilvus"),
    ("qdrant_client", lambda: QdrantVectorStore(dimension=4, model="m", url="http://127.0.0.1:1")._get(),
     "the Qdrant vector store needs qdrant-client"),
])
def test_each_backend_imports_its_library_when_first_used(monkeypatch: pytest.MonkeyPatch, module: str,
                                                          use: Callable[[], Any], message: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(RuntimeError, match=message + r": pip install 'ultimate-rag\[backends\]'"):
        use()
