"""Authentication before the body: the bearer key of every ``/api`` and ``/v1`` request is checked before the
application is handed the receive channel, so a request without a valid key is answered 401 with
not one byte of its body read (an unauthenticated client cannot make the server buffer anything).
The principal found is left in the request state, where the ``principal`` dependency picks it up."""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from ..bootstrap import Container
from ..domain.errors import AuthenticationError, DatabaseError
from .deps import authenticate
from .errors import RETRY_AFTER_SECONDS
from .openai_errors import is_openai_path

log = logging.getLogger(__name__)


class ApiKeyGate:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == "/api" or path.startswith("/api/") or is_openai_path(path)):
            await self.app(scope, receive, send)
            return
        # set by the app at startup, before any request is served
        container = cast(Container, getattr(scope["app"].state, "container", None))
        header = next((v for k, v in scope.get("headers") or [] if k == b"authorization"), None)
        try:
            who = await authenticate(container.access.api_keys, container.settings,
                                     header.decode("latin-1") if header is not None else None)
        except AuthenticationError as exc:
            await _answer(send, 401, exc.message, [(b"www-authenticate", b"Bearer")])
            return
        except Exception as exc:  # the database is down: say so without reading the body either
            await refuse_unchecked_key(send, exc)
            return
        scope.setdefault("state", {})["principal"] = who
        await self.app(scope, receive, send)


async def refuse_unchecked_key(send: Any, exc: Exception) -> None:
    """The key could not be checked (the database is down): 503 with ``Retry-After``, one log line."""
    if isinstance(exc, DatabaseError):
        log.warning("could not check an API key: database unavailable (%s)", exc.message.splitlines()[0][:200])
    else:
        log.error("could not check an API key", exc_info=exc)
    await key_check_unavailable(send)


async def key_check_unavailable(send: Any) -> None:
    """503 with ``Retry-After``, as every other answer while the database is unavailable."""
    await _answer(send, 503, "the key cannot be checked right now: try again in a few seconds",
                  [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])


async def _answer(send: Any, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    # connection: close, so the server drops the unread body instead of draining it
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": json.dumps({"detail": detail}).encode()})
