"""How each error becomes an answer: the aggregator's own tree (:mod:`mfumon.api.errors`) and the third-party errors
that reach a route (FastAPI's validation, SQLAlchemy's), translated here and nowhere else.

Every refusal of an ingest request is counted in ``mfumon_ingest_requests_total{endpoint,outcome}``; nothing a
refused request sent was stored (its transaction rolled back).
"""

from __future__ import annotations

import html
import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.exc import DataError, OperationalError, StatementError
from starlette.exceptions import HTTPException

from mfumon.api.errors import ConflictError, ForbiddenError, InputError, NotFoundError, SamplesBacklogged
from mfumon.api.methods import allowed_methods
from mfumon.api.route_table import NODE_SAMPLES, endpoint_of

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = "5"


def _count(request: Request, outcome: str, endpoint: str | None = None) -> None:
    """Count a refused ingest request (reads and unknown paths are not ingest, and are not counted)."""
    endpoint = endpoint or endpoint_of(request.method, request.url.path)
    if endpoint is not None and hasattr(request.app.state, "ctx"):
        request.app.state.ctx.self_metrics.count_ingest(endpoint, outcome)


async def validation_failed(request: Request, exc: RequestValidationError) -> Response:
    """422 listing each field the schema refused, with its dotted name."""
    _count(request, "invalid")
    detail = [
        {
            "field": ".".join(str(part) for part in err["loc"][1:]) or str(err["loc"][0]),
            "loc": list(err["loc"]),
            "msg": err["msg"],
            "type": err["type"],
        }
        for err in exc.errors()
    ]
    return JSONResponse(status_code=422, content={"detail": detail})


async def unusable_value(request: Request, exc: ValueError) -> Response:
    """422: input the schema let through but the service cannot use (:class:`InputError` names the field)."""
    _count(request, "invalid")
    field = exc.field if isinstance(exc, InputError) else "body"
    detail = [{"field": field, "loc": ["body", field], "msg": str(exc), "type": "value_error"}]
    return JSONResponse(status_code=422, content={"detail": detail})


async def forbidden(request: Request, exc: ForbiddenError) -> Response:
    """403: a valid token writing outside its teams."""
    _count(request, "forbidden")
    return JSONResponse(status_code=403, content={"detail": str(exc)})


async def not_found(request: Request, exc: NotFoundError) -> Response:
    """404: the message names what does not exist."""
    return JSONResponse(status_code=404, content={"detail": str(exc)})


async def conflict(request: Request, exc: ConflictError) -> Response:
    """409: the request contradicts what is stored."""
    return JSONResponse(status_code=409, content={"detail": str(exc)})


async def database_unavailable(request: Request, exc: OperationalError) -> Response:
    """503: the database is down or locked; exporters and reporters retry later."""
    logger.warning("database unavailable: %s", type(exc.orig).__name__)
    _count(request, "unavailable")
    detail = {"detail": "database unavailable, retry later"}
    return JSONResponse(status_code=503, content=detail, headers={"Retry-After": RETRY_AFTER_SECONDS})


async def unstorable(request: Request, exc: StatementError) -> Response:
    """422, never a 500, for a value validation let through but the database cannot store. Validation should have
    caught it first (the schema bounds are the storage bounds), so it is logged as a gap to close."""
    if not isinstance(exc, DataError) and not isinstance(exc.orig, ValueError):
        raise exc
    logger.warning("the database refused a validated value (%s): %s", type(exc.orig).__name__, exc.orig)
    _count(request, "invalid")
    detail = [{"field": "body", "loc": ["body"], "msg": "a value cannot be stored", "type": "value_error"}]
    return JSONResponse(status_code=422, content={"detail": detail})


async def samples_backlogged(request: Request, exc: SamplesBacklogged) -> Response:
    """503: the database is behind the durability bound; the exporter spools the push and retries."""
    _count(request, "unavailable", endpoint=NODE_SAMPLES)
    return JSONResponse(status_code=503, content={"detail": str(exc)}, headers={"Retry-After": RETRY_AFTER_SECONDS})


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    """405 with every method of the path in ``Allow`` (:mod:`mfumon.api.methods`), not only the first route's."""
    assert isinstance(exc, HTTPException)
    methods = allowed_methods(request)
    headers = {**(exc.headers or {}), "Allow": ", ".join(methods)} if methods else exc.headers
    return await http_exception_handler(request, HTTPException(exc.status_code, exc.detail, headers))


_NOT_FOUND_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Not found - mfu-monitor</title></head>
<body><h1>Not found</h1><p>The aggregator has no page at <code>{path}</code>.</p>
<p><a href="{root}/ui">Cluster</a> &middot; <a href="{root}/ui/jobs">Jobs</a></p></body></html>
"""


async def not_found_page(request: Request, exc: Exception) -> Response:
    """404 under ``/ui`` is a page a browser shows (a plain one, linking the pages that exist); elsewhere JSON."""
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if path != "/ui" and not path.startswith("/ui/"):
        return await http_exception_handler(request, exc)
    root = html.escape(str(request.scope.get("root_path", "")).rstrip("/"), quote=True)
    body = _NOT_FOUND_PAGE.format(path=html.escape(path), root=root)
    return HTMLResponse(body, status_code=404, headers=exc.headers)


def install(app: FastAPI) -> None:
    """Register every handler on ``app``."""
    app.add_exception_handler(RequestValidationError, validation_failed)  # type: ignore[arg-type]
    app.add_exception_handler(ValueError, unusable_value)  # type: ignore[arg-type]
    app.add_exception_handler(ForbiddenError, forbidden)  # type: ignore[arg-type]
    app.add_exception_handler(NotFoundError, not_found)  # type: ignore[arg-type]
    app.add_exception_handler(ConflictError, conflict)  # type: ignore[arg-type]
    app.add_exception_handler(OperationalError, database_unavailable)  # type: ignore[arg-type]
    app.add_exception_handler(StatementError, unstorable)  # type: ignore[arg-type]
    app.add_exception_handler(SamplesBacklogged, samples_backlogged)  # type: ignore[arg-type]
    app.add_exception_handler(405, method_not_allowed)
    app.add_exception_handler(404, not_found_page)
