"""``urls`` (a list of pages) and ``sitemap`` (a sitemap or sitemap index, bounded in depth and
count). Every request goes through ``SafeHttpClient``: SSRF rules on every hop, size and time caps."""

from __future__ import annotations

import gzip
import zlib
from urllib.parse import urlsplit
from xml.etree import ElementTree

from ...adapters.http.outbound import SafeHttpClient
from ...domain.errors import PermanentError, TransientError
from ...domain.redact import redact_url
from .base import ConnectorConfigError, Fetched, Known, RemoteItem, name_from_url

MAX_URL_LENGTH = 2048


def check_url(url: object) -> str:
    if not isinstance(url, str) or not url.strip():
        raise ConnectorConfigError("every URL must be a non-empty string")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > MAX_URL_LENGTH:
        raise ConnectorConfigError(f"not an http(s) URL: {url[:200]}")
    if any(ord(ch) < 33 for ch in url):
        raise ConnectorConfigError("URLs must not contain spaces or control characters")
    return url


class HttpFetcher:
    def __init__(self, client: SafeHttpClient, *, max_bytes: int, timeout: float) -> None:
        self._client = client
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def get(self, url: str, known: Known | None = None) -> Fetched:
        headers: dict[str, str] = {}
        if known is not None and known.etag:
            headers["If-None-Match"] = known.etag
        if known is not None and known.last_modified:
            headers["If-Modified-Since"] = known.last_modified
        result = await self._client.fetch(url, max_bytes=self.max_bytes, timeout=self.timeout, headers=headers)
        status = result.status_code
        shown = redact_url(url)
        if status == 304 and headers:
            return Fetched(None, known.etag if known else None, known.last_modified if known else None)
        if status in (404, 410):
            raise PermanentError(f"{shown} answered {status} {'Not Found' if status == 404 else 'Gone'}")
        if status == 429 or status >= 500:
            raise TransientError(f"{shown} answered {status}")
        if status != 200:
            raise PermanentError(f"{shown} answered {status}")
        return Fetched(result.content, result.headers.get("etag"), result.headers.get("last-modified"),
                       result.headers.get("content-type"), name_from_url(result.url))


class UrlListSource:
    def __init__(self, urls: list[str], fetcher: HttpFetcher, *, max_items: int) -> None:
        self._urls = list(dict.fromkeys(check_url(u) for u in urls))[:max_items]
        self._fetcher = fetcher

    async def discover(self) -> list[RemoteItem]:
        return [RemoteItem(u, name_from_url(u)) for u in self._urls]

    async def fetch(self, item: RemoteItem, known: Known | None) -> Fetched:
        return await self._fetcher.get(item.external_id, known)


class SitemapSource:
    """Pages listed by a sitemap; a sitemap index is followed ``max_depth`` levels deep, and at most
    ``max_items`` pages (and as many sitemaps) are read."""

    def __init__(self, url: str, fetcher: HttpFetcher, *, max_depth: int, max_items: int) -> None:
        self._url = check_url(url)
        self._fetcher = fetcher
        self._max_depth = max_depth
        self._max_items = max_items

    async def discover(self) -> list[RemoteItem]:
        pages: dict[str, None] = {}
        seen: set[str] = set()
        queue: list[tuple[str, int]] = [(self._url, 0)]
        while queue and len(pages) < self._max_items:
            url, depth = queue.pop(0)
            if url in seen or len(seen) >= self._max_items:
                continue
            seen.add(url)
            fetched = await self._fetcher.get(url)
            kind, locs = parse_sitemap(fetched.content or b"", self._fetcher.max_bytes)
            for loc in locs:
                try:
                    loc = check_url(loc)
                except ConnectorConfigError:
                    continue
                if kind == "sitemapindex":
                    if depth + 1 <= self._max_depth:
                        queue.append((loc, depth + 1))
                elif len(pages) < self._max_items:
                    pages.setdefault(loc)
        return [RemoteItem(u, name_from_url(u)) for u in pages]

    async def fetch(self, item: RemoteItem, known: Known | None) -> Fetched:
        return await self._fetcher.get(item.external_id, known)


def parse_sitemap(data: bytes, max_bytes: int) -> tuple[str, list[str]]:
    """("urlset" | "sitemapindex", the <loc> values). Gzipped sitemaps are inflated up to ``max_bytes``.
    No DTDs or entities are resolved (expat refuses external entities; a DOCTYPE is refused here)."""
    if data[:2] == b"\x1f\x8b":
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = inflater.decompress(data, max_bytes + 1)
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise PermanentError("the sitemap is not valid gzip") from exc
        if len(data) > max_bytes:
            raise PermanentError(f"the sitemap inflates to more than {max_bytes} bytes")
    if b"<!DOCTYPE" in data[:4096].upper() or b"<!ENTITY" in data.upper():
        raise PermanentError("the sitemap declares a DOCTYPE or entities, which are not accepted")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise PermanentError(f"the sitemap is not valid XML: {exc}") from exc
    kind = root.tag.rsplit("}", 1)[-1]
    if kind not in ("urlset", "sitemapindex"):
        raise PermanentError(f"not a sitemap (root element {kind!r})")
    locs = [el.text.strip() for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "loc" and el.text]
    return kind, locs
