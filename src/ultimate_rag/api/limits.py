"""Request body limit enforced while the body streams in, so an upload over the limit is refused
before it is spooled anywhere — with or without a Content-Length header."""

from __future__ import annotations

import json
from typing import Any

Scope = dict[str, Any]


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    def __init__(self, app: Any, max_body_bytes: int, upload_limit_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.upload_limit_bytes = upload_limit_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = False
        exceeded = False

        async def counting_receive() -> dict[str, Any]:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    exceeded = True
                    raise BodyTooLarge()
            return message  # type: ignore[no-any-return]

        async def tracking_send(message: dict[str, Any]) -> None:
            # the framework may turn the aborted body read into its own error response: say 413
            nonlocal started
            if exceeded:
                if not started:
                    started = True
                    await self._refuse(send)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps({"detail": f"the file is larger than the limit of {self.upload_limit_bytes} bytes"})
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body.encode()})
