"""The knowledge-base workbench: a static page at ``/`` and its files under ``/web/`` (plain
JavaScript, CSS and translations, no build step). Everything it shows comes from the ``/api``
routes, called with the API key the page keeps in ``sessionStorage`` (docs/workbench.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

WEB_DIR = Path(__file__).resolve().parent.parent / "web"

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=FileResponse)
async def workbench() -> FileResponse:
    return FileResponse(WEB_DIR / "index.html", media_type="text/html; charset=utf-8",
                        headers={"Cache-Control": "no-cache"})


class _StaticFiles(StaticFiles):
    """Static files that are revalidated on every load (they change with the installed version)."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


def static_files() -> StaticFiles:
    return _StaticFiles(directory=WEB_DIR, html=False)
