"""Secrets kept out of what keys are shown: the userinfo of a URL (``https://user:pass@host/``),
secret-looking query parameters (``token``, ``key``, ``signature``, ``X-Amz-*``, ...) and
secret-looking configuration fields. The stored connector configuration keeps them (a sync needs
them); responses, sync errors and document errors show the redacted form, and a configuration sent
back in its redacted form keeps the stored secrets (``restore_secrets``)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "REDACTED"
_SECRET_NAME = re.compile(
    r"token|secret|passw|pwd|signature|^sig$|credential|auth|session|api[-_]?key|^key$|access[-_]?key"
    r"|private|^x-amz-|^x-goog-", re.IGNORECASE)
_URL = re.compile(r"https?://[^\s'\"<>]+", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.strip()))


def redact_url(url: str) -> str:
    """``url`` without its userinfo and with secret-looking query values masked; anything that does
    not parse as a URL is returned as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(k) for k, _ in pairs):
            query = urlencode([(k, MASK if is_secret_name(k) else v) for k, v in pairs], safe="/:")
    fragment = parts.fragment
    if fragment and "=" in fragment:  # OAuth implicit flows put tokens in the fragment
        pairs = parse_qsl(fragment, keep_blank_values=True)
        if any(is_secret_name(k) for k, _ in pairs):
            fragment = urlencode([(k, MASK if is_secret_name(k) else v) for k, v in pairs], safe="/:")
    if netloc == parts.netloc and query == parts.query and fragment == parts.fragment:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def redact_text(text: str | None) -> str | None:
    """Every http(s) URL inside ``text`` redacted."""
    if not text:
        return text
    def one(match: re.Match[str]) -> str:
        url = match.group(0)
        core = url.rstrip(".,;:)]")
        return redact_url(core) + url[len(core):]

    return _URL.sub(one, text)


def redact_config(value: Any, name: str = "") -> Any:
    """A connector configuration (any JSON value) with secret fields masked and URLs redacted."""
    if isinstance(value, dict):
        return {k: (MASK if is_secret_name(str(k)) and v not in (None, "") else redact_config(v, str(k)))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_config(v, name) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def restore_secrets(new: Any, stored: Any) -> Any:
    """``new`` with every value that equals the redacted form of a stored one replaced by the stored
    value: a configuration read back (redacted) and sent again keeps its credentials."""
    originals: dict[str, Any] = {}

    def collect(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                collect(v, str(k))
        elif isinstance(value, list):
            for v in value:
                collect(v, key)
        elif isinstance(value, str):
            originals.setdefault(redact_text(value) or value, value)
            if key and is_secret_name(key):
                originals.setdefault(f"{key}\x00{MASK}", value)

    collect(stored)

    def put_back(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: put_back(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [put_back(v, key) for v in value]
        if isinstance(value, str) and MASK in value:
            if value == MASK and key:
                return originals.get(f"{key}\x00{MASK}", value)
            return originals.get(value, value)
        return value

    return put_back(new)
