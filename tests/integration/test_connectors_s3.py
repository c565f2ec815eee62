"""The ``s3`` connector against a real S3 server (SeaweedFS on 127.0.0.1, with credentials): first
sync, unchanged resync (nothing downloaded or reprocessed), changed object, removed object, admin only."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from ultimate_rag.adapters.postgres.api_keys import ApiKeyRepository
from ultimate_rag.domain.auth import Role
from ultimate_rag.settings import Settings
from ultimate_rag.testing.fixtures import seaweed  # noqa: F401 - pytest finds fixtures by name
from ultimate_rag.testing.servers import SeaweedS3

from ..conftest import ADMIN_KEY
from .helpers import new_kb
from .test_connectors import counts, create, docs_by_item, process, sync_now

BUCKET = "connector-source"


@pytest.fixture
def settings(db_url: str, tmp_path: Path, seaweed: SeaweedS3) -> Settings:  # noqa: F811
    return Settings(
        database_url=db_url, data_dir=tmp_path / "data", admin_key=ADMIN_KEY, lease_seconds=30,
        retry_delay_seconds=0.05, poll_interval_seconds=0.2, max_upload_bytes=1_000_000,
        s3_endpoint_url=seaweed.endpoint_url, s3_access_key_id=seaweed.access_key,
        s3_secret_access_key=seaweed.secret_key, s3_max_attempts=2, connector_max_item_bytes=20_000,
    )


@pytest.fixture
def bucket(seaweed: SeaweedS3):  # noqa: F811
    s3 = boto3.client("s3", endpoint_url=seaweed.endpoint_url, aws_access_key_id=seaweed.access_key,
                      aws_secret_access_key=seaweed.secret_key, region_name="us-east-1")
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    for obj in s3.list_objects_v2(Bucket=BUCKET).get("Contents") or []:
        s3.delete_object(Bucket=BUCKET, Key=obj["Key"])
    return s3


async def test_s3_prefix_sync(client, container, bucket) -> None:
    kb = await new_kb(container)
    bucket.put_object(Bucket=BUCKET, Key="docs/a.md", Body=b"# A\n\nalpha in the bucket\n")
    bucket.put_object(Bucket=BUCKET, Key="docs/sub/b.txt", Body=b"beta in the bucket\n",
                      Metadata={"department": "legal", "review-year": "2025"})
    bucket.put_object(Bucket=BUCKET, Key="docs/big.txt", Body=b"z" * 20_001)
    bucket.put_object(Bucket=BUCKET, Key="other/c.md", Body=b"# C\n\nnot under the prefix\n")

    editor = await ApiKeyRepository(container.infra.db).create(is_admin=False, scopes={kb: Role.EDITOR})
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors", headers={"Authorization": f"Bearer {editor}"},
                          json={"kind": "s3", "config": {"bucket": BUCKET, "prefix": "docs"}})
    assert r.status_code == 403
    r = await client.post(f"/api/knowledge-bases/{kb}/connectors", json={"kind": "s3", "config": {"bucket": "A"}})
    assert r.status_code == 400

    connector = await create(client, kb, "s3", {"bucket": BUCKET, "prefix": "docs/"})
    first = await sync_now(client, container, kb, connector)
    assert first["status"] == "SUCCEEDED", first
    assert counts(first, "discovered", "new", "failed") == (3, 2, 1)
    docs = await docs_by_item(container, kb)
    assert set(docs) == {"a.md", "sub/b.txt", "big.txt"} and "limit" in docs["big.txt"]["error_message"]
    # the object's user metadata and its place under the prefix become the document's s3 and source fields
    assert docs["sub/b.txt"]["metadata"] == {"s3": {"department": "legal", "review-year": "2025"},
                                            "source": {"path": "sub/b.txt", "folder": "sub", "folders": ["sub"]}}
    assert docs["a.md"]["metadata"] == {"source": {"path": "a.md"}} and docs["a.md"]["source"]["path"] == "a.md"
    await process(container)
    r = await client.patch(f"/api/documents/{docs['sub/b.txt']['id']}", json={"metadata": {"owner": "ana"}})
    assert r.status_code == 200

    assert counts(await sync_now(client, container, kb, connector), "unchanged", "updated", "new") == (2, 0, 0)
    bucket.put_object(Bucket=BUCKET, Key="docs/sub/b.txt", Body=b"beta, rewritten\n")
    bucket.delete_object(Bucket=BUCKET, Key="docs/a.md")
    third = await sync_now(client, container, kb, connector)
    assert counts(third, "updated", "removed") == (1, 1)
    await process(container)
    docs = await docs_by_item(container, kb)
    assert docs["a.md"]["status"] == "DELETED" and docs["sub/b.txt"]["status"] == "READY"
    assert docs["sub/b.txt"]["content_revision"] == 2
    assert docs["sub/b.txt"]["metadata"]["owner"] == "ana" and "s3" not in docs["sub/b.txt"]["metadata"]  # rewritten


async def test_missing_bucket_fails_the_sync(client, container, bucket) -> None:
    kb = await new_kb(container)
    connector = await create(client, kb, "s3", {"bucket": "no-such-bucket-here", "prefix": ""})
    sync = await sync_now(client, container, kb, connector)
    assert sync["status"] == "FAILED" and sync["error"]


async def test_a_rewrite_within_the_same_second_is_seen_as_changed(client, container, bucket) -> None:
    """S3's LastModified has a resolution of one second: the version also carries the ETag, so new
    bytes written right after the old ones are never taken for unchanged."""
    kb = await new_kb(container)
    connector = await create(client, kb, "s3", {"bucket": BUCKET, "prefix": "fast/"})
    bucket.put_object(Bucket=BUCKET, Key="fast/note.md", Body=b"# Note\n\nthe first words\n")
    assert counts(await sync_now(client, container, kb, connector), "new") == (1,)
    await process(container)
    bucket.put_object(Bucket=BUCKET, Key="fast/note.md", Body=b"# Note\n\nthe second words\n")
    assert counts(await sync_now(client, container, kb, connector), "updated", "unchanged") == (1, 0)
