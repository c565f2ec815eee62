"""Errors of the OpenAI-compatible routes (``/v1``) in the shape OpenAI clients read:
``{"error": {"message", "type", "code"}}`` (``detail`` kept beside it, as every other route has it).
Chat front ends show ``error.message``; the OpenAI SDKs raise their typed errors by status."""

from __future__ import annotations

import json
from typing import Any

_TYPES = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
          403: ("invalid_request_error", "insufficient_permissions"), 404: ("invalid_request_error", "model_not_found"),
          413: ("invalid_request_error", "request_too_large"), 422: ("invalid_request_error", None),
          429: ("rate_limit_error", None), 502: ("server_error", None), 503: ("server_error", None),
          504: ("server_error", "timeout")}


def is_openai_path(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


class OpenAIErrorShape:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not is_openai_path(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] | None = None
        body = bytearray()

        async def reshaped(message: dict[str, Any]) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message  # held until the whole (small, JSON) error body is here
                return
            if start is None:
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body"):
                return
            data = _reshape(start["status"], bytes(body))
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

        await self.app(scope, receive, reshaped)


def _reshape(status: int, body: bytes) -> bytes:
    try:
        found = json.loads(body)
    except ValueError:
        return body
    if not isinstance(found, dict) or "detail" not in found or "error" in found:
        return body
    kind, code = _TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return json.dumps({"error": {"message": str(found["detail"]), "type": kind, "param": None, "code": code},
                       "detail": found["detail"]}).encode()
