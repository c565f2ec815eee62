"""Request body limits enforced while the body streams in, so an upload over the limit is refused
before it is spooled anywhere — with or without a Content-Length header. Only the two upload routes
(POST .../documents, PUT .../content) take multipart bodies and get the upload limit; every other
route takes JSON, gets the JSON limit whatever the Content-Type says, and refuses a form body (415)
before reading it."""

from __future__ import annotations

import json
import re
from typing import Any

UPLOAD_ROUTES = (
    ("POST", re.compile(r"^/api/knowledge-bases/[^/]+/documents/?$")),
    ("PUT", re.compile(r"^/api/documents/[^/]+/content/?$")),
)
FORM_TYPES = (b"multipart/", b"application/x-www-form-urlencoded")


def is_upload_route(method: str, path: str) -> bool:
    return any(method == m and pattern.match(path) for m, pattern in UPLOAD_ROUTES)

Scope = dict[str, Any]


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    def __init__(self, app: Any, max_body_bytes: int, upload_limit_bytes: int, max_json_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.upload_limit_bytes = upload_limit_bytes
        self.max_json_bytes = max_json_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        content_type = headers.get(b"content-type", b"").lower()
        upload_route = is_upload_route(scope.get("method", ""), scope.get("path", ""))
        if not upload_route and content_type.startswith(FORM_TYPES):
            await self._refuse(send, "this route takes a JSON body (Content-Type: application/json)", 415)
            return
        multipart = upload_route and content_type.startswith(b"multipart/")
        limit = self.max_body_bytes if multipart else self.max_json_bytes
        refusal = (f"the file is larger than the limit of {self.upload_limit_bytes} bytes" if multipart
                   else f"the request body is larger than the limit of {self.max_json_bytes} bytes")
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(send, refusal)
            return
        seen = 0
        started = False
        exceeded = False

        async def counting_receive() -> dict[str, Any]:
            nonlocal seen, exceeded
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    exceeded = True
                    raise BodyTooLarge()
            return message

        async def tracking_send(message: dict[str, Any]) -> None:
            # the framework may turn the aborted body read into its own error response: say 413
            nonlocal started
            if exceeded:
                if not started:
                    started = True
                    await self._refuse(send, refusal)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send, refusal)
        except BaseExceptionGroup as group:  # read inside a task group (the MCP transport): the same refusal
            if group.subgroup(BodyTooLarge) is None:
                raise
            if not started:
                await self._refuse(send, refusal)

    @staticmethod
    async def _refuse(send: Any, message: str, status: int = 413) -> None:
        body = json.dumps({"detail": message})
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body.encode()})


SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"content-security-policy",
     b"default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
     b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
]


class SecurityHeaders:
    """Headers that make the browser refuse to sniff, frame or leak: on every response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = scope.get("path", "") == "/docs"  # Swagger UI starts itself with an inline script

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS
                         if k not in present and not (docs and k == b"content-security-policy")]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)
