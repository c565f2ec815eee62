"""The interactive API docs at ``/docs`` (Swagger UI), served entirely by this server: its
JavaScript and CSS come from the ``swagger-ui-bundle`` package and are mounted under
``/docs-assets``, so the page works on a machine without network (no CDN). ReDoc is off."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs-assets"

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
async def swagger_ui(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url=request.app.openapi_url, title=f"{request.app.title} API",
                               swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                               swagger_css_url=f"{ASSETS}/swagger-ui.css",
                               swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")


def static_files() -> StaticFiles:
    return StaticFiles(directory=str(swagger_ui_path))
