"""Windowed usage route: where the GPU-seconds of a window went, per pool, team and the cluster."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import ContextDep
from api.schemas.usage import UsagePublic
from api.services.usage import parse_time, read_usage

router = APIRouter(prefix="/v1/usage", tags=["usage"])

TimeQuery = Query(max_length=32, description="Unix seconds, or a duration back from now: 7d, 24h, 90m, 1w")


@router.get("", response_model=UsagePublic)
def read_window(
    ctx: ContextDep,
    since: Annotated[str, TimeQuery] = "7d",
    until: Annotated[str | None, TimeQuery] = None,
) -> UsagePublic:
    """The waterfall (GPU-seconds by category), goodput, MFU and job ends of a window, in whole hours."""
    now = ctx.clock()
    start = parse_time(since, now=now, field="since")
    end = parse_time(until, now=now, field="until") if until is not None else now
    return read_usage(ctx, start, end)
