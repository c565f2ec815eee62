"""The FastAPI application factory. Services are built in the lifespan (or handed in by tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from .. import __version__
from ..bootstrap import Container, build, freeze_startup_heap
from ..mcp_server.http import mount_mcp
from ..settings import Settings
from .errors import install_error_handlers
from .gate import ApiKeyGate
from .limits import BodySizeLimit, SecurityHeaders
from .openai_errors import OpenAIErrorShape
from .routes import admin, answers, api_docs, connectors, documents, health, knowledge_bases, openai_compat, operations
from .routes import embedding_migration as embedding_migration_routes
from .routes import events as events_routes
from .routes import statuses as statuses_routes
from .routes import web as web_routes


def create_app(settings: Settings | None = None, container: Container | None = None) -> FastAPI:
    settings = settings or (container.settings if container else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if container is not None:  # handed in (tests): its owner opens and closes it
            yield
            return
        built = build(settings, acquire_timeout=settings.api_db_pool_timeout_seconds,
                      statement_timeout=settings.api_statement_timeout_seconds or None)
        await built.open()
        app.state.container = built
        freeze_startup_heap()
        try:
            yield
        finally:
            await built.close()  # the events hub with it

    app = FastAPI(title="ultimate-rag", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Durable document ingestion and retrieval for RAG knowledge bases.")
    install_error_handlers(app)
    if container is not None:
        app.state.container = container

    # the multipart envelope around the file gets a fixed allowance on top of the upload limit
    app.add_middleware(BodySizeLimit, max_body_bytes=settings.max_upload_bytes + 64 * 1024,
                       upload_limit_bytes=settings.max_upload_bytes, max_json_bytes=settings.max_json_body_bytes)
    app.add_middleware(ApiKeyGate)  # outside the body limit: no key, no body read (not even its length judged)
    app.add_middleware(OpenAIErrorShape)  # /v1 errors as OpenAI clients read them, the gate's 401 too
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:  # off unless configured
        app.add_middleware(CORSMiddleware, allow_origins=origins, allow_methods=["*"],
                           allow_headers=["Authorization", "Content-Type"], allow_credentials=False)
    app.add_middleware(SecurityHeaders)

    app.include_router(health.router)
    app.include_router(knowledge_bases.router)
    app.include_router(embedding_migration_routes.router)
    app.include_router(answers.router)
    app.include_router(openai_compat.router)  # /v1: the knowledge bases as OpenAI chat models
    app.include_router(connectors.router)
    app.include_router(operations.router)  # before documents: /api/documents/{document_id} would take /stuck
    app.include_router(documents.router)
    app.include_router(admin.router)
    app.include_router(events_routes.router)
    app.include_router(statuses_routes.router)  # the status vocabulary the workbench reads
    app.include_router(web_routes.router)  # the workbench: `/` and `/web/...`
    app.mount("/web", web_routes.static_files(), name="web")
    app.include_router(api_docs.router)  # Swagger UI from the installed package, no CDN
    app.mount(api_docs.ASSETS, api_docs.static_files(), name="docs-assets")

    mount_mcp(app)  # MCP over Streamable HTTP, same keys and scopes as /api
    return app
