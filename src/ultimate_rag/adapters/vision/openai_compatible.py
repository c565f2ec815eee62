"""Describe an image with an OpenAI-compatible chat completions endpoint (image input as a
``data:`` URL). Every failure (connection, timeout, HTTP error, a reply without text) is a
``TransientError``: the job retries with the usual backoff."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.request
from typing import Any

from ultimate_rag.domain.errors import TransientError

PROMPT = ("Describe this image for a search index in two or three sentences: what it shows, any "
          "text in it, and what a reader learns from it. Reply with the description only.")


class OpenAICompatibleVision:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 60.0,
                 max_tokens: int = 300) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.timeout = timeout
        self.max_tokens = max_tokens

    async def describe(self, data: bytes, mime_type: str, context: str = "") -> str:
        return await asyncio.to_thread(self._describe, data, mime_type, context)

    def _describe(self, data: bytes, mime_type: str, context: str) -> str:
        prompt = PROMPT + (f"\nExisting caption or alt text: {context}" if context else "")
        body = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": prompt},
                {"type": "image_url", "image_url": {
                    "url": f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}"}},
            ]}],
        }
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # the operator-configured endpoint
                reply: Any = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise TransientError(f"the vision model returned HTTP {exc.code}", service="vision model",
                                 code=f"HTTP {exc.code}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TransientError(f"the vision model could not be reached: {reason}", service="vision model") from exc
        except ValueError as exc:
            raise TransientError("the vision model returned a reply that is not JSON") from exc
        try:
            text = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise TransientError("the vision model's reply has no message content") from exc
        if isinstance(text, list):  # content parts
            text = " ".join(part.get("text", "") for part in text if isinstance(part, dict))
        text = " ".join(str(text or "").split())
        if not text:
            raise TransientError("the vision model returned an empty description")
        return text
