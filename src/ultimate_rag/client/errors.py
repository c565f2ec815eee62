"""The API's errors as exceptions. Every one carries the HTTP status and the server's own message
(``{"detail": ...}``), which is also the exception's text."""

from __future__ import annotations

from typing import Any

# what the package exports (client/__init__.py): every class, not error_for
__all__ = ["ApiError", "AuthenticationFailed", "BadRequest", "Conflict", "NotFound", "PayloadTooLarge",
           "PermissionDenied", "RateLimited", "ServerError", "ServiceUnavailable", "TransportError",
           "UltimateRagError", "UnsupportedFormat", "ValidationFailed"]


class UltimateRagError(Exception):
    """Base of everything the client raises."""


class TransportError(UltimateRagError):
    """The server could not be reached, or the connection broke (after the retries)."""


class ApiError(UltimateRagError):
    status_code: int = 0

    def __init__(self, status_code: int, detail: str, body: Any = None) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail
        self.body = body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status_code}, {self.detail!r})"


class BadRequest(ApiError):
    """400: the request is invalid."""


class AuthenticationFailed(ApiError):
    """401: the key is missing, invalid, revoked or expired."""


class PermissionDenied(ApiError):
    """403: this key may not do that (a reader key writing, a scoped key doing admin work)."""


class NotFound(ApiError):
    """404: not found, or not visible to this key."""


class Conflict(ApiError):
    """409: the document or knowledge base is busy or in the wrong state; try again later."""


class PayloadTooLarge(ApiError):
    """413: the file or body is over the server's limit."""


class UnsupportedFormat(ApiError):
    """415: the server cannot read this kind of file."""


class ValidationFailed(ApiError):
    """422: a field has a bad value."""


class RateLimited(ApiError):
    """429: too many requests (raised once the retries are spent)."""


class ServiceUnavailable(ApiError):
    """503: the server or a backend is not available (raised once the retries are spent)."""


class ServerError(ApiError):
    """Any other 5xx."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: AuthenticationFailed, 403: PermissionDenied, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge, 415: UnsupportedFormat, 422: ValidationFailed, 429: RateLimited, 503: ServiceUnavailable,
}


def error_for(status_code: int, body: Any, text: str) -> ApiError:
    detail = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(detail, str):
        detail = str(detail) if detail is not None else (text.strip()[:500] or f"HTTP {status_code}")
    kind = _BY_STATUS.get(status_code) or (ServerError if status_code >= 500 else ApiError)
    return kind(status_code, detail, body)
