"""The one HTTP client for outbound requests made on a user's behalf (connectors fetching user-given
URLs, and any other call whose target a user can influence).

It refuses every address that is not globally routable — loopback, private, link-local (cloud
metadata at 169.254.169.254 included), carrier-grade NAT, multicast, reserved, and the IPv6
equivalents, IPv4-mapped ones too — unless an operator allowed its network
(``ULTIMATE_RAG_OUTBOUND_ALLOW_NETWORKS``). The host name is resolved once, every address it
resolves to is checked, and the connection goes to the checked address (the Host header and TLS
name stay the host name), so a DNS answer cannot change between check and use. Redirects are
followed by hand and each one is checked the same way. Responses are capped in size and time.

Error messages reach the keys that read the knowledge base: they name the URL without its
credentials (``redact_url``) and never say what a host name resolved to (an attacker would learn
the internal network's addresses).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from ...domain.errors import PermanentError, TransientError
from ...domain.redact import redact_url

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]


class OutboundRefusedError(PermanentError):
    """That address may not be fetched."""


class ResponseTooLargeError(PermanentError):
    """The response is larger than allowed."""


@dataclass(frozen=True)
class FetchResult:
    url: str
    status_code: int
    headers: httpx.Headers
    content: bytes
    redirects: tuple[str, ...]


def parse_networks(spec: str | Sequence[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    return [ipaddress.ip_network(item.strip(), strict=False) for item in items if item.strip()]


class OutboundPolicy:
    def __init__(self, allow_networks: str | Sequence[str] = "") -> None:
        self.allowed = parse_networks(allow_networks)

    def refusal(self, address: str) -> str | None:
        """Why ``address`` may not be reached, or None when it may."""
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        if any(ip in net for net in self.allowed):
            return None
        for candidate in (ip, *_embedded_ipv4(ip)):
            if candidate.is_loopback:
                return "loopback"
            if candidate.is_link_local:
                return "link-local (cloud metadata lives here)"
            if candidate.is_multicast or candidate.is_unspecified or candidate.is_reserved:
                return "not a unicast address"
            if candidate.is_private or not candidate.is_global:
                return "private or not globally routable"
        return None


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class SafeHttpClient:
    def __init__(self, policy: OutboundPolicy, *, resolver: Resolver = system_resolve, max_redirects: int = 5,
                 user_agent: str = "ultimate-rag") -> None:
        self._policy = policy
        self._resolve = resolver
        self._max_redirects = max_redirects
        self._headers = {"User-Agent": user_agent}

    async def fetch(self, url: str, *, max_bytes: int, timeout: float, headers: dict[str, str] | None = None,
                    sink: Callable[[bytes], None] | None = None) -> FetchResult:
        """GET ``url`` (following checked redirects); raises OutboundRefusedError,
        ResponseTooLargeError, or TransientError for timeouts and network failures. With ``sink``,
        the body of a 200 answer is not kept: its raw bytes (not decoded: only ``identity`` and
        ``gzip`` content encodings are accepted) go to ``sink`` as they arrive, and ``content`` is
        empty; whatever ``sink`` raises stops the download."""
        redirects: list[str] = []
        try:
            async with asyncio.timeout(timeout), httpx.AsyncClient(follow_redirects=False, trust_env=False,
                                                                    timeout=timeout) as client:
                while True:
                    response, content = await self._one(client, url, max_bytes, headers or {}, sink)
                    location = response.headers.get("location")
                    if response.status_code in (301, 302, 303, 307, 308) and location:
                        if len(redirects) >= self._max_redirects:
                            raise PermanentError(f"too many redirects fetching {redact_url(redirects[0])}")
                        redirects.append(url)
                        url = urljoin(url, location)
                        continue
                    return FetchResult(url, response.status_code, response.headers, content, tuple(redirects))
        except TimeoutError as exc:
            raise TransientError(f"fetching {redact_url(url)} took longer than {timeout:g} s") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"fetching {redact_url(url)} failed: {exc.__class__.__name__}") from exc

    async def _one(self, client: httpx.AsyncClient, url: str, max_bytes: int, headers: dict[str, str],
                   sink: Callable[[bytes], None] | None = None) -> tuple[httpx.Response, bytes]:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OutboundRefusedError(f"refusing to fetch {redact_url(url)}: only http and https URLs are fetched")
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = [host] if _is_ip(host) else await self._resolve(host, port)
        except OSError as exc:
            raise TransientError(f"cannot resolve {host}: {exc.strerror or exc.__class__.__name__}") from exc
        if not addresses:
            raise TransientError(f"cannot resolve {host}")
        for address in addresses:  # one bad answer refuses the host: no picking the safe one by luck
            reason = self._policy.refusal(address)
            if reason:
                what = f"the address {host}" if _is_ip(host) else f"the address of host {host}"
                raise OutboundRefusedError(  # the resolved address is never named: it maps the inside
                    f"refusing to fetch {redact_url(url)}: {what} is not allowed ({reason}; "
                    "ULTIMATE_RAG_OUTBOUND_ALLOW_NETWORKS can allow it)")
        pinned = addresses[0]
        netloc = f"[{pinned}]" if ":" in pinned else pinned
        target = urlunsplit((parts.scheme, f"{netloc}:{port}", parts.path or "/", parts.query, ""))
        host_header = host if parts.port is None else f"{host}:{parts.port}"
        request = client.build_request("GET", target, headers={**self._headers, **headers, "Host": host_header},
                                       extensions={"sni_hostname": host} if parts.scheme == "https" else {})
        response = await client.send(request, stream=True)
        try:
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise ResponseTooLargeError(f"{redact_url(url)} is {declared} bytes, over the limit of {max_bytes}")
            if sink is not None and response.status_code == 200:
                await _stream_raw(response, url, max_bytes, sink)
                return response, b""
            body = bytearray()
            async for block in response.aiter_bytes():
                body += block
                if len(body) > max_bytes:
                    raise ResponseTooLargeError(f"{redact_url(url)} is larger than the limit of {max_bytes} bytes")
            return response, bytes(body)
        finally:
            await response.aclose()


async def _stream_raw(response: httpx.Response, url: str, max_bytes: int, sink: Callable[[bytes], None]) -> None:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip"):
        raise PermanentError(f"{redact_url(url)} was sent with the content encoding {encoding[:40]!r}, "
                             "which is not accepted here")
    received = 0
    async for block in response.aiter_raw():
        received += len(block)
        if received > max_bytes:
            raise ResponseTooLargeError(f"{redact_url(url)} is larger than the limit of {max_bytes} bytes")
        sink(block)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries (mapped, 6to4, NAT64): they are checked too."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
    if ip in _NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
