"""The chargeback of a window: cost, GPU-hours and energy per team and job, plus idle and unreported rows that add
up to the fleet (``mfumon.api.services.chargeback``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from mfumon.api.deps import ContextDep, TimeQuery, window_bounds
from mfumon.api.openapi import invalid_when
from mfumon.api.schemas.chargeback import ChargebackPublic
from mfumon.api.services.chargeback import read_chargeback

router = APIRouter(prefix="/v1/chargeback", tags=["chargeback"])


@router.get("", response_model=ChargebackPublic, responses=invalid_when("`since` is not before `until` (or now)."))
def read_window(
    ctx: ContextDep,
    since: Annotated[str, TimeQuery] = "30d",
    until: Annotated[str | None, TimeQuery] = None,
) -> ChargebackPublic:
    """Cost and GPU-hours of a window, in whole hours: per team, jobs without a team, idle capacity and unreported
    busy GPUs (the rows add up to `fleet`), per pool, and per job."""
    start, end = window_bounds(ctx.clock(), since, until)
    return read_chargeback(ctx, start, end)
