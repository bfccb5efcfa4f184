"""``GET /v1/compare?a=JOB&b=JOB``: two jobs before and after (``mfumon.api.services.compare``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from mfumon.api.deps import ContextDep
from mfumon.api.openapi import answer
from mfumon.api.schemas._common import ID_PATTERN
from mfumon.api.schemas.compare import ComparePublic
from mfumon.api.services.compare import compare

router = APIRouter(prefix="/v1/compare", tags=["baselines"])

JobQuery = Annotated[str, Query(pattern=ID_PATTERN, max_length=128, description="a job id")]


@router.get(
    "", response_model=ComparePublic, responses=answer(404, "Job `a` or `b` does not exist (the detail names it).")
)
def read_comparison(ctx: ContextDep, a: JobQuery, b: JobQuery) -> ComparePublic:
    """Job `a` (before) and job `b` (after): MFU, tokens/s per GPU, goodput, and the waterfall share by share,
    with `b - a` deltas. Ended jobs are read from their summaries."""
    return compare(ctx, a, b)
