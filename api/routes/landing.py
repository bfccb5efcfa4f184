"""``GET /`` (the landing page) and ``GET /docs`` (Swagger UI), both served without the internet: Swagger UI's
files come from the ``fastapi-offline`` package (swagger-ui 5, which reads OpenAPI 3.1; ``swagger-ui-bundle``'s
swagger-ui 4 answers "Unable to render this definition"), so an air-gapped cluster sees the same page as anyone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import fastapi_offline
from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import FileResponse, HTMLResponse

from mfumon.api.pages import render

router = APIRouter(include_in_schema=False)

SWAGGER_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
DOCS_STATIC = "/docs/static"
_MEDIA = {".js": "text/javascript", ".css": "text/css", ".png": "image/png", ".map": "application/json"}


@router.get("/", response_class=HTMLResponse)
def read_landing(request: Request) -> HTMLResponse:
    """Links to the pages, the API docs, the metrics and the JSON reads."""
    return render("landing.html", version=request.app.version)


@router.get("/docs", response_class=HTMLResponse)
def read_docs() -> HTMLResponse:
    """Swagger UI for ``/openapi.json``, its script, stylesheet and icon from this server."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="mfu-monitor aggregator: API",
        swagger_js_url=f"{DOCS_STATIC}/swagger-ui-bundle.js",
        swagger_css_url=f"{DOCS_STATIC}/swagger-ui.css",
        swagger_favicon_url=f"{DOCS_STATIC}/favicon.png",
        # Swagger UI would otherwise ask validator.swagger.io for a badge: a request to the internet.
        swagger_ui_parameters={"validatorUrl": None},
    )


def static_file(directory: Path, name: str) -> FileResponse | HTMLResponse:
    """A file shipped in ``directory`` (by plain name: no path, no dot-files), or a 404 page."""
    path = directory / name
    if name.startswith(".") or "/" in name or not path.is_file():
        return render("error.html", 404, status_code=404, heading="Not found", message=f"No file {name!r} here.")
    return FileResponse(path, media_type=_MEDIA.get(path.suffix, "application/octet-stream"))


@router.get(f"{DOCS_STATIC}/{{name}}", response_model=None)
def read_docs_file(name: Annotated[str, PathParam(max_length=128)]) -> FileResponse | HTMLResponse:
    """Swagger UI's own files (from ``fastapi-offline``)."""
    return static_file(SWAGGER_DIR, name)
