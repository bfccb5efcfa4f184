"""The pages under ``/ui``: the cluster, the jobs list, a job, and two jobs compared (HTML, no script).

Reads go through the services like the JSON API's, and the same admission rule guards them (a ``read`` token when
``MFUMON_READ_REQUIRES_TOKEN`` is on). A bad input gets an HTML page with its 4xx status: 404 for an unknown job,
422 for a filter value the list does not know.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import FileResponse, HTMLResponse

from mfumon.api.deps import ContextDep, JobIdPath
from mfumon.api.errors import InputError, NotFoundError
from mfumon.api.pages import STATIC_DIR, render
from mfumon.api.pages.chargeback import CHARGEBACK_TABLES, chargeback_page
from mfumon.api.pages.cluster import CLUSTER_TABLES, MAX_JOBS_READ, cluster_page
from mfumon.api.pages.compare import compare_page
from mfumon.api.pages.jobs import (
    FILTERS,
    JOB_TABLES,
    JOBS_TABLE,
    KINDS,
    STATUSES,
    hardware_reason,
    job_page,
    list_jobs,
    mfu_reason,
)
from mfumon.api.pages.regressions import regressions_page
from mfumon.api.pages.view import PageQuery, QueryError, Table, parse
from mfumon.api.routes.landing import static_file
from mfumon.api.schemas._common import ID_PATTERN

router = APIRouter(prefix="/ui", include_in_schema=False)

Filter = Annotated[str, Query(max_length=128)]
JobQuery = Annotated[str, Query(max_length=128)]
_JOB_ID = re.compile(ID_PATTERN.removesuffix("$") + r"\Z")


def _error(status_code: int, heading: str, message: str) -> HTMLResponse:
    return render("error.html", status_code, status_code=status_code, heading=heading, message=message)


def _query(request: Request, tables: Sequence[Table[Any]]) -> PageQuery | HTMLResponse:
    """The page's range, refresh and sort (:mod:`mfumon.api.pages.view`), or a 422 page naming the values it takes."""
    params = {k: v[:128] for k, v in request.query_params.items()}
    try:
        return parse(request.url.path, params, tables=tables)
    except QueryError as exc:
        return _error(422, "Unknown page option", str(exc))


@router.get("", response_class=HTMLResponse)
def read_cluster_page(ctx: ContextDep, request: Request) -> HTMLResponse:
    """The cluster at a glance; ``?range=`` (1h, 6h, 24h, 7d), ``?refresh=`` seconds (0: never), ``?sort=&dir=``."""
    query = _query(request, CLUSTER_TABLES)
    if isinstance(query, HTMLResponse):
        return query
    return render("cluster.html", **cluster_page(ctx, query))


@router.get("/jobs", response_class=HTMLResponse)
def read_jobs_page(
    ctx: ContextDep, request: Request, status: Filter = "", team: Filter = "", pool: Filter = "", kind: Filter = ""
) -> HTMLResponse:
    """Jobs, filtered by status, team, pool and kind; ``?range=``, ``?refresh=``, ``?sort=&dir=`` as on ``/ui``."""
    filters = {"status": status, "team": team, "pool": pool, "kind": kind}
    for name, allowed in (("status", STATUSES), ("kind", KINDS)):
        if filters[name] and filters[name] not in allowed:
            return _error(422, "Unknown filter value", f"{name} must be one of {', '.join(allowed)} (or empty).")
    query = _query(request, (JOBS_TABLE,))
    if isinstance(query, HTMLResponse):
        return query
    lines, truncated, choices = list_jobs(ctx, filters, query)
    return render(
        "jobs.html",
        q=query,
        table=JOBS_TABLE,
        lines=lines,
        truncated=truncated,
        max_jobs=MAX_JOBS_READ,
        filters={k: filters[k] for k in FILTERS},
        choices=choices,
        mfu_reason=mfu_reason,
        hardware_reason=hardware_reason,
    )


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def read_job_page(job_id: JobIdPath, ctx: ContextDep, request: Request) -> HTMLResponse:
    """One job: MFU over time, waterfall, diagnosis, stragglers, events, baseline; ``?range=`` narrows the charts to
    the last hour, 6 h, 24 h or 7 d; ``?refresh=`` and ``?sort=&dir=`` as on ``/ui``."""
    query = _query(request, JOB_TABLES)
    if isinstance(query, HTMLResponse):
        return query
    try:
        context = job_page(ctx, job_id, query)
    except NotFoundError:
        return _error(404, "No such job", f"The aggregator has no job {job_id!r}.")
    return render("job.html", **context)


@router.get("/regressions", response_class=HTMLResponse)
def read_regressions_page(ctx: ContextDep, request: Request) -> HTMLResponse:
    """Software changes per signature and what they did to MFU (``GET /v1/regressions``); ``?range=`` narrows the
    window from its default 30 days, ``?refresh=`` as on ``/ui``."""
    query = _query(request, ())
    if isinstance(query, HTMLResponse):
        return query
    return render("regressions.html", **regressions_page(ctx, query))


@router.get("/chargeback", response_class=HTMLResponse)
def read_chargeback_page(ctx: ContextDep, request: Request) -> HTMLResponse:
    """Cost, GPU-hours and energy per team, idle and unreported GPUs, pool and job (``GET /v1/chargeback``);
    ``?since=`` (24h, 7d, 30d: what the API takes, 30d by default) and ``?until=``, ``?refresh=`` and
    ``?sort=&dir=`` as on ``/ui``."""
    query = _query(request, CHARGEBACK_TABLES)
    if isinstance(query, HTMLResponse):
        return query
    if query.range:
        return _error(422, "Unknown page option", "This page takes since= (24h, 7d, 30d, or Unix seconds), not range=.")
    try:
        context = chargeback_page(ctx, query)
    except InputError as exc:
        return _error(422, "Unknown window", str(exc))
    return render("chargeback.html", **context)


@router.get("/compare", response_class=HTMLResponse)
def read_compare_page(ctx: ContextDep, a: JobQuery = "", b: JobQuery = "") -> HTMLResponse:
    """Job ``a`` (before) against job ``b`` (after); with neither, a form to name them."""
    if not a and not b:
        return render("compare.html", a="", b="", result=None)
    for name, value in (("a", a), ("b", b)):
        if not _JOB_ID.match(value):
            return _error(422, "Name two jobs", f"{name} must be a job id (letters, digits and ._:@+-), got {value!r}.")
    try:
        context = compare_page(ctx, a, b)
    except NotFoundError as exc:
        return _error(404, "No such job", str(exc))
    return render("compare.html", a=a, b=b, **context)


@router.get("/static/{name}", response_model=None)
def read_static(name: Annotated[str, Path(max_length=128)]) -> FileResponse | HTMLResponse:
    """The pages' stylesheet."""
    return static_file(STATIC_DIR, name)
