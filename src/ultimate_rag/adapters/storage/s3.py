"""S3-compatible object storage (AWS S3, MinIO, SeaweedFS) through boto3, run in threads.

* **Streaming**: uploads go through boto3's transfer manager, which switches to a multipart upload
  above ``multipart_threshold`` and sends ``part_size`` parts from a view of the caller's buffer
  (the object is never copied whole); downloads are read ``chunk_size`` at a time by ``stream``.
* **Retries**: botocore's ``standard`` retry mode retries 5xx answers, throttling (``SlowDown``),
  timeouts and dropped connections with exponential backoff and jitter, ``max_attempts`` in all.
* **Errors**: what is left after the retries is mapped to the domain: a missing key is
  ``ResourceNotFoundError``; bad credentials, a missing bucket or a refused request are
  ``PermanentError`` (configuration: retrying will not help); everything else is ``TransientError``.
* The bucket is created by ``ensure_bucket(create=True)``, which ``ultimate-rag migrate`` calls
  when ``ULTIMATE_RAG_S3_CREATE_BUCKET`` allows it; otherwise a missing bucket is reported.

Keys are stored under an optional prefix (``s3://bucket/prefix``) that callers never see.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from ...domain.errors import PermanentError, ResourceNotFoundError, TransientError
from ..backends import import_backend

_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
_CONFIG = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket", "AllAccessDisabled",
           "InvalidBucketName", "AuthorizationHeaderMalformed", "InvalidArgument", "InvalidRequest",
           "PermanentRedirect", "403", "400", "301", "MethodNotAllowed", "405"}


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix/``)."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"invalid S3 storage URL {url!r}: expected s3://bucket[/prefix]")
    prefix = parsed.path.strip("/")
    return parsed.netloc, f"{prefix}/" if prefix else ""


class S3ObjectStorage:
    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 region: str | None = None, access_key_id: str | None = None,
                 secret_access_key: str | None = None, max_attempts: int = 5, connect_timeout: float = 5.0,
                 read_timeout: float = 60.0, multipart_threshold: int = 16 << 20, part_size: int = 8 << 20,
                 max_pool_connections: int = 32) -> None:
        boto3 = import_backend("boto3", "S3 storage")
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.region = region
        config = Config(
            retries={"mode": "standard", "max_attempts": max_attempts},
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            max_pool_connections=max_pool_connections,
            s3={"addressing_style": "path"} if endpoint_url else {},
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
        )
        self._client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint_url, region_name=region or "us-east-1",
            aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key, config=config)
        self._transfer = TransferConfig(multipart_threshold=multipart_threshold, multipart_chunksize=part_size,
                                        max_concurrency=4, use_threads=True)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> S3ObjectStorage:
        bucket, prefix = parse_s3_url(url)
        return cls(bucket, prefix, **kwargs)

    # keys ------------------------------------------------------------------------------------
    def _key(self, key: str) -> str:
        if not key or key.startswith("/") or "\\" in key or any(p in ("", ".", "..") for p in key.split("/")):
            raise ValueError(f"invalid object key: {key!r}")
        return self.prefix + key

    def _dir(self, prefix: str) -> str:
        prefix = prefix.strip("/")
        return self._key(prefix) + "/" if prefix else self.prefix

    # the port --------------------------------------------------------------------------------
    async def put(self, key: str, data: bytes, content_type: str) -> None:
        full = self._key(key)
        await self._call(self._put, full, data, content_type, what=f"store {key}")

    def _put(self, full: str, data: bytes, content_type: str) -> None:
        # BytesIO over bytes shares the caller's buffer; multipart parts are read from it one by one
        self._client.upload_fileobj(io.BytesIO(data), self.bucket, full, Config=self._transfer,
                                    ExtraArgs={"ContentType": content_type or "application/octet-stream"})

    async def get(self, key: str) -> bytes:
        full = self._key(key)
        data: bytes = await self._call(lambda: self._client.get_object(Bucket=self.bucket, Key=full)["Body"].read(),
                                       what=f"read {key}", key=key)
        return data

    async def exists(self, key: str) -> bool:
        full = self._key(key)
        try:
            await self._call(lambda: self._client.head_object(Bucket=self.bucket, Key=full), what=f"check {key}",
                             key=key)
        except ResourceNotFoundError:
            return False
        return True

    async def user_metadata(self, key: str) -> dict[str, str]:
        full = self._key(key)
        head = await self._call(lambda: self._client.head_object(Bucket=self.bucket, Key=full), what=f"check {key}",
                                key=key)
        return {str(k): str(v) for k, v in (head.get("Metadata") or {}).items()}

    async def delete(self, key: str) -> None:
        full = self._key(key)
        await self._call(lambda: self._client.delete_object(Bucket=self.bucket, Key=full), what=f"delete {key}")

    async def delete_prefix(self, prefix: str) -> int:
        return int(await self._call(self._delete_prefix, self._dir(prefix), what=f"delete {prefix}"))

    def _delete_prefix(self, full_prefix: str) -> int:
        deleted = 0
        batch: list[dict[str, str]] = []
        for key, _, _ in self._iter_keys(full_prefix):
            batch.append({"Key": key})
            if len(batch) == 1000:
                deleted += self._delete_batch(batch)
                batch = []
        if batch:
            deleted += self._delete_batch(batch)
        return deleted

    def _delete_batch(self, batch: list[dict[str, str]]) -> int:
        answer = self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
        errors = answer.get("Errors") or []
        if errors:
            first = errors[0]
            raise TransientError(f"S3 refused to delete {len(errors)} objects, e.g. {first.get('Key')}: "
                                 f"{first.get('Code')} {first.get('Message')}", service="object storage")
        return len(batch)

    async def stream(self, key: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        full = self._key(key)
        response = await self._call(lambda: self._client.get_object(Bucket=self.bucket, Key=full),
                                    what=f"read {key}", key=key)
        body = response["Body"]
        try:
            while True:
                block = await self._call(body.read, chunk_size, what=f"read {key}", key=key)
                if not block:
                    return
                yield block
        finally:
            body.close()

    async def list_keys(self, prefix: str = "", batch: int = 1000) -> AsyncIterator[tuple[str, datetime]]:
        async for key, modified, _ in self.list_versions(prefix, batch):
            yield key, modified

    async def list_versions(self, prefix: str = "", batch: int = 1000) -> AsyncIterator[tuple[str, datetime, str]]:
        """Keys with their modification time and ETag (a rewrite within the same second as the
        previous write keeps LastModified, never the ETag of different bytes)."""
        pages = self._pages(self._dir(prefix), batch)
        while True:
            page = await self._call(next, pages, None, what=f"list {prefix or 'objects'}")
            if page is None:
                return
            for key, modified, etag in page:
                yield key[len(self.prefix):], modified, etag

    # operations ------------------------------------------------------------------------------
    async def ping(self) -> bool:
        await self._call(lambda: self._client.head_bucket(Bucket=self.bucket), what=f"reach bucket {self.bucket}")
        return True

    def ensure_bucket(self, create: bool) -> bool:
        """Check the bucket (synchronously: ``migrate`` calls it); create it when allowed and missing.
        Returns True when it was created."""
        from botocore.exceptions import ClientError

        try:
            self._client.head_bucket(Bucket=self.bucket)
            return False
        except ClientError as exc:
            if _code(exc) not in {"404", "NoSuchBucket", "NotFound"}:
                raise _mapped(exc, f"reach bucket {self.bucket}") from exc
        if not create:
            raise PermanentError(f"the S3 bucket {self.bucket!r} does not exist; create it, or set "
                                 "ULTIMATE_RAG_S3_CREATE_BUCKET=true to let migrate create it")
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.region and self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self._client.create_bucket(**kwargs)
        except ClientError as exc:
            if _code(exc) not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                raise _mapped(exc, f"create bucket {self.bucket}") from exc
        return True

    # helpers ---------------------------------------------------------------------------------
    def _iter_keys(self, full_prefix: str, page_size: int = 1000) -> Iterator[tuple[str, datetime, str]]:
        for page in self._pages(full_prefix, page_size):
            yield from page

    def _pages(self, full_prefix: str, page_size: int) -> Iterator[list[tuple[str, datetime, str]]]:
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=full_prefix,
                                       PaginationConfig={"PageSize": page_size}):
            found = [(o["Key"], _utc(o["LastModified"]), str(o.get("ETag") or "").strip('"'))
                     for o in page.get("Contents") or []]
            if found:
                yield found

    async def _call(self, fn: Any, *args: Any, what: str, key: str | None = None) -> Any:
        try:
            return await asyncio.to_thread(fn, *args)
        except (ResourceNotFoundError, PermanentError, TransientError):
            raise
        except Exception as exc:
            raise _mapped(exc, what, key) from exc


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    code = str((response.get("Error") or {}).get("Code") or "")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return code or str(status or "")


def _mapped(exc: BaseException, what: str, key: str | None = None) -> Exception:
    from botocore.exceptions import ClientError, NoCredentialsError, ParamValidationError

    if isinstance(exc, ClientError):
        code = _code(exc)
        message = (exc.response.get("Error") or {}).get("Message") or code
        status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0
        if key is not None and code in _NOT_FOUND:
            return ResourceNotFoundError(f"source object {key} is missing from storage")
        if code in _CONFIG or (400 <= int(status) < 500 and code not in {"RequestTimeout", "SlowDown", "429"}):
            return PermanentError(f"S3 could not {what}: {code}: {message} (check the S3 settings)",
                                  service="object storage", code=_http(status))
        return TransientError(f"S3 could not {what}: {code}: {message}", service="object storage", code=_http(status))
    if isinstance(exc, NoCredentialsError | ParamValidationError):
        return PermanentError(f"S3 could not {what}: {exc} (check the S3 settings)", service="object storage")
    return TransientError(f"S3 could not {what}: {exc}", service="object storage")


def _http(status: object) -> str | None:
    """A safe detail for users: the HTTP status, never the bucket, key or endpoint."""
    return f"HTTP {status}" if status else None


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
