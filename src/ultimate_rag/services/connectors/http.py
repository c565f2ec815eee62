"""``urls`` (a list of pages) and ``sitemap`` (a sitemap or sitemap index, bounded in depth and
count). Every request goes through the outbound client (``ports.OutboundFetch``, adapters/http/outbound.py):
SSRF rules on every hop, size and time caps."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from ...domain.errors import PermanentError, TransientError
from ...domain.ports import OutboundFetch
from ...domain.redact import redact_url
from .base import ConnectorConfigError, Fetched, Known, RemoteItem, name_from_url
from .sitemap import Enough, SitemapError, SitemapReader

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
    def __init__(self, client: OutboundFetch, *, max_bytes: int, timeout: float) -> None:
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
        if status == 304 and headers:
            return Fetched(None, known.etag if known else None, known.last_modified if known else None)
        _check_status(url, status)
        return Fetched(result.content, result.headers.get("etag"), result.headers.get("last-modified"),
                       result.headers.get("content-type"), name_from_url(result.url))

    async def stream(self, url: str, sink: Callable[[bytes], None], *, max_bytes: int) -> None:
        """GET ``url`` and hand the body of its 200 answer to ``sink`` block by block, as it arrives
        (gzip only as a content encoding: the sink inflates it, in bounded pieces)."""
        result = await self._client.fetch(url, max_bytes=max_bytes, timeout=self.timeout, sink=sink,
                                          headers={"Accept-Encoding": "gzip"})
        _check_status(url, result.status_code)


def _check_status(url: str, status: int) -> None:
    shown = redact_url(url)
    if status in (404, 410):
        raise PermanentError(f"{shown} answered {status} {'Not Found' if status == 404 else 'Gone'}")
    if status == 429 or status >= 500:
        raise TransientError(f"{shown} answered {status}")
    if status != 200:
        raise PermanentError(f"{shown} answered {status}")


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
    ``max_items`` pages (and as many sitemaps) are read, each one streamed through ``SitemapReader``
    (at most ``max_bytes`` once decompressed; reading stops as soon as enough items are known)."""

    def __init__(self, url: str, fetcher: HttpFetcher, *, max_depth: int, max_items: int, max_bytes: int) -> None:
        self._url = check_url(url)
        self._fetcher = fetcher
        self._max_depth = max_depth
        self._max_items = max_items
        self._max_bytes = max_bytes

    async def discover(self) -> list[RemoteItem]:
        pages: dict[str, None] = {}
        seen: set[str] = set()
        queue: list[tuple[str, int]] = [(self._url, 0)]
        while queue and len(pages) < self._max_items:
            url, depth = queue.pop(0)
            if url in seen or len(seen) >= self._max_items:
                continue
            seen.add(url)

            def on_loc(kind: str, loc: str, depth: int = depth) -> bool:
                try:
                    loc = check_url(loc)
                except ConnectorConfigError:
                    return True
                if kind == "sitemapindex":
                    if depth + 1 > self._max_depth:
                        return False  # nothing in this index will be read
                    queue.append((loc, depth + 1))
                    return len(queue) < self._max_items
                pages.setdefault(loc)
                return len(pages) < self._max_items

            reader = SitemapReader(self._max_bytes, on_loc)
            try:
                await self._fetcher.stream(url, reader.feed, max_bytes=self._max_bytes)
                reader.close()
            except Enough:
                pass  # the item limit is reached: the rest is not even downloaded
            except SitemapError as exc:
                raise SitemapError(f"{redact_url(url)}: {exc.message}") from exc
        return [RemoteItem(u, name_from_url(u)) for u in pages]

    async def fetch(self, item: RemoteItem, known: Known | None) -> Fetched:
        return await self._fetcher.get(item.external_id, known)
