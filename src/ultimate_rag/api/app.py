"""The FastAPI application factory. Services are built in the lifespan (or handed in by tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from .. import __version__
from ..bootstrap import Container, build
from ..settings import Settings
from .errors import install_error_handlers
from .routes import documents, health, knowledge_bases


def create_app(settings: Settings | None = None, container: Container | None = None) -> FastAPI:
    settings = settings or (container.settings if container else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if container is not None:  # handed in (tests): its owner opens and closes it
            yield
            return
        built = build(settings)
        await built.open()
        app.state.container = built
        try:
            yield
        finally:
            await built.close()

    app = FastAPI(title="ultimate-rag", version=__version__, lifespan=lifespan,
                  description="Durable document ingestion and retrieval for RAG knowledge bases.")
    install_error_handlers(app)
    if container is not None:
        app.state.container = container

    @app.middleware("http")
    async def reject_oversized_bodies(request: Request, call_next):  # type: ignore[no-untyped-def]
        """Refuse an upload whose declared size is over the limit before reading any of it."""
        length = request.headers.get("content-length")
        limit = settings.max_upload_bytes + 1024 * 1024  # room for the multipart envelope
        if length and length.isdigit() and int(length) > limit:
            return JSONResponse({"detail": f"the file is larger than the limit of {settings.max_upload_bytes}"
                                           " bytes"}, status_code=413)
        return await call_next(request)

    app.include_router(health.router)
    app.include_router(knowledge_bases.router)
    app.include_router(documents.router)
    return app
