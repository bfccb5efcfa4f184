"""Regressions route: software changes that moved MFU, per signature (``mfumon.api.services.regressions``)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from mfumon.api.deps import ContextDep, TimeQuery, window_bounds
from mfumon.api.openapi import invalid_when
from mfumon.api.regressions.analysis import MIN_JOBS, Change
from mfumon.api.regressions.stats import Estimate
from mfumon.api.schemas.regressions import MfuEstimate, OtherChange, RegressionPublic, RegressionsPublic
from mfumon.api.services.regressions import METHOD, read_changes

router = APIRouter(prefix="/v1/regressions", tags=["regressions"])

Verdict = Literal["regression", "improvement", "no_change", "too_few_jobs"]


def _estimate(found: Estimate | None) -> MfuEstimate | None:
    if found is None:
        return None
    return MfuEstimate(mean=found.mean, low=found.low, high=found.high, spread=found.spread, jobs=found.n)


def public(change: Change) -> RegressionPublic:
    return RegressionPublic(
        signature=change.signature,
        component=change.component,
        before=change.before,
        after=change.after,
        verdict=change.verdict,
        relative_change=change.relative_change,
        confidence=change.confidence,
        p_value=change.p_value,
        noise=change.noise,
        mfu_before=_estimate(change.mfu_before),
        mfu_after=_estimate(change.mfu_after),
        step_seconds_before=change.step_seconds_before,
        step_seconds_after=change.step_seconds_after,
        jobs_before=list(change.jobs_before),
        jobs_after=list(change.jobs_after),
        affected_jobs=list(change.affected_jobs),
        gpu_hours_after=change.gpu_hours_after,
        confounded=change.confounded,
        also_changed=[OtherChange(component=a.component, before=a.before, after=a.after) for a in change.also_changed],
        jobs_needed=MIN_JOBS,
    )


@router.get("", response_model=RegressionsPublic, responses=invalid_when("`since` is not before `until` (or now)."))
def read_regressions(
    ctx: ContextDep,
    since: Annotated[str, TimeQuery] = "30d",
    until: Annotated[str | None, TimeQuery] = None,
    verdict: Annotated[list[Verdict] | None, Query(description="only these verdicts (repeatable)")] = None,
) -> RegressionsPublic:
    """Each change of one software component within a signature, and what it did to MFU, over the training jobs
    that started in the window: regressions and improvements beyond the noise, changes that did nothing, and
    steps with too few jobs to tell."""
    now = ctx.clock()
    start, end = window_bounds(now, since, until)
    changes = [public(c) for c in read_changes(ctx, start, end) if not verdict or c.verdict in verdict]
    return RegressionsPublic(since=start, until=end, method=METHOD, changes=changes)
