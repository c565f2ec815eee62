"""Domain errors to HTTP statuses, in one place. Every error is ``{"detail": "..."}``, never a trace."""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..domain import errors as e
from ..services.failures import explain

log = logging.getLogger(__name__)

_STATUS: list[tuple[type[Exception], int]] = [
    (e.AuthenticationError, 401),
    (e.ResourceNotFoundError, 404),
    (e.ConflictError, 409),
    (e.FileTooLargeError, 413),
    (e.UnsupportedFormatError, 415),
    (e.UnprocessableRequestError, 422),
    (e.InvalidRequestError, 400),
    (e.InvalidDocumentError, 422),
    (e.ProviderTimeoutError, 504),
    (e.ProviderRateLimitedError, 503),
    (e.ProviderError, 502),
    (e.TransientError, 503),  # a backend (storage, embedder) is unavailable for now
]
RETRY_AFTER_SECONDS = 5  # what a 503 tells the client to wait before trying again
DATABASE_UNAVAILABLE = "the database is unavailable right now; try again in a few seconds"


def status_for(exc: Exception) -> int:
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(e.UltimateRagError)
    async def domain_error(_: Request, exc: e.UltimateRagError) -> JSONResponse:
        status = status_for(exc)
        if status == 500:
            log.error("unexpected domain error: %s", exc)
            return JSONResponse({"detail": "internal error"}, status_code=500)
        if isinstance(exc, e.ProviderRateLimitedError):
            return JSONResponse({"detail": exc.message}, status_code=status,
                                headers={"Retry-After": str(max(1, math.ceil(exc.retry_after)))})
        if status == 503:
            # the backend's raw message (hosts, buckets) goes to the log; the client gets its reason
            log.warning("503: %s", exc.message)
            return _unavailable(f"{explain(exc).reason}; try again in a few seconds")
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        body: dict[str, object] = {"detail": exc.message}
        if isinstance(exc, e.UnsupportedFormatError) and exc.supported_formats:
            body["supported_formats"] = list(exc.supported_formats)
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(e.DatabaseUnavailableError)
    async def database_unavailable(request: Request, exc: e.DatabaseUnavailableError) -> JSONResponse:
        # a connection that failed, broke or could not be had from the pool in time (PoolTimeout):
        # one line, no traceback, and an answer (the client's keep-alive connection stays usable)
        log.warning("503 for %s %s: database unavailable (%s)", request.method, request.url.path,
                    exc.message.splitlines()[0][:200] if exc.message else "")
        return _unavailable(DATABASE_UNAVAILABLE)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
        return JSONResponse({"detail": "; ".join(parts) or "invalid request"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"detail": str(exc.detail)}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(e.UnstorableValueError)
    async def unstorable_value(_: Request, exc: e.UnstorableValueError) -> JSONResponse:
        # a value the database refuses (a NUL byte, an out-of-range number) is the client's to fix
        log.warning("refused a value the database cannot store: %s", exc.__cause__.__class__.__name__)
        return JSONResponse({"detail": "the request holds a value that cannot be stored"}, status_code=400)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse({"detail": "internal error"}, status_code=500)


def _unavailable(detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
