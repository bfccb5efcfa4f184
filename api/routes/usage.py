"""Windowed usage route: where the GPU-seconds of a window went, per pool, team and the cluster."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from mfumon.api.deps import ContextDep, TimeQuery, window_bounds
from mfumon.api.openapi import invalid_when
from mfumon.api.schemas.usage import UsagePublic
from mfumon.api.services.usage import read_usage

router = APIRouter(prefix="/v1/usage", tags=["usage"])


@router.get("", response_model=UsagePublic, responses=invalid_when("`since` is not before `until` (or now)."))
def read_window(
    ctx: ContextDep,
    since: Annotated[str, TimeQuery] = "7d",
    until: Annotated[str | None, TimeQuery] = None,
) -> UsagePublic:
    """The waterfall (GPU-seconds by category), goodput, MFU and job ends of a window, in whole hours."""
    now = ctx.clock()
    start, end = window_bounds(now, since, until)
    return read_usage(ctx, start, end)
