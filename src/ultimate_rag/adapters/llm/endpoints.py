"""Which chat endpoints are local, and the provider timeout that suits each.

A model served on this machine or the local network (Ollama, llama.cpp, vLLM on a workstation)
often runs on a CPU or a small GPU: reading a prompt of a few thousand tokens can take minutes
before the first token, where a hosted API answers in seconds. Without a configured timeout a
local endpoint gets ``LOCAL_TIMEOUT_SECONDS`` and a hosted one ``REMOTE_TIMEOUT_SECONDS``; a local
endpoint's timeout is not retried either (its server is still working on the abandoned request:
asking again only queues behind it). Decided from the URL alone, with no DNS lookup."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOCAL_TIMEOUT_SECONDS = 300.0
REMOTE_TIMEOUT_SECONDS = 60.0
_LOCAL_NAMES = frozenset({"localhost", "host.docker.internal", "host.containers.internal"})
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")


def is_local_endpoint(url: str) -> bool:
    """Loopback, private or link-local addresses, ``localhost`` and local-network names, and a
    name without a dot (a container or compose service such as ``http://ollama:11434``)."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if not host:
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host in _LOCAL_NAMES or host.endswith(_LOCAL_SUFFIXES) or "." not in host
    return ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified


def provider_timeout(url: str, configured: float | None) -> float:
    """The longest silence of the provider that a try waits for: the configured one, else the
    default of a local or a hosted endpoint."""
    if configured is not None:
        return configured
    return LOCAL_TIMEOUT_SECONDS if is_local_endpoint(url) else REMOTE_TIMEOUT_SECONDS
