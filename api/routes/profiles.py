"""Profile routes: ask a running job for a profile, receive its ranks' summaries, list its profiles."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from mfumon.api.deps import ContextDep, JobIdPath, JobWriter, ProfileRequester, reject_future_timestamp
from mfumon.api.openapi import answer, invalid_when
from mfumon.api.route_table import route_spec
from mfumon.api.schemas.profiles import ProfilePublic, ProfileRequestCreate, ProfilesPublic, ProfileSummaryCreate
from mfumon.api.services import profiles

router = APIRouter(prefix="/v1/jobs", tags=["profiles"])


@router.post(
    "/{job_id}/profile",
    response_model=ProfilePublic,
    status_code=202,
    responses=answer(409, "The job is not running, or a profile of it is already asked and not yet answered."),
)
@route_spec("profile", endpoint="job_profile_request")
def create_profile_request(
    job_id: JobIdPath, body: ProfileRequestCreate, ctx: ContextDep, principal: ProfileRequester
) -> ProfilePublic:
    """Ask a running job to profile its next steps; it learns of it in the answer to its next report."""
    row = profiles.request_profile(ctx, job_id, body, principal)
    ctx.self_metrics.count_ingest("job_profile_request", "accepted")
    return profiles.public(row)


@router.post(
    "/{job_id}/profiles",
    response_model=ProfilePublic,
    responses={
        **answer(409, "The profile already holds the summaries of as many ranks as it keeps (4096)."),
        **invalid_when(
            "a part exceeds its whole: `compute_seconds`, `comm_seconds`, `idle_seconds` or a group's "
            "`comm_seconds` above `span_seconds`; `exposed_comm_seconds` above `comm_seconds`; a group's "
            "`exposed_seconds` above its `comm_seconds`.",
            "a group appears twice in `groups`.",
        ),
    },
)
@route_spec("jobs", endpoint="job_profiles")
def create_profile_summary(
    job_id: JobIdPath, body: ProfileSummaryCreate, ctx: ContextDep, principal: JobWriter
) -> ProfilePublic:
    """One profiled rank's summary, reduced on its node (the raw trace stays there)."""
    if body.captured_at is not None:
        reject_future_timestamp(ctx, body.captured_at, "captured_at")
    row = profiles.record_summary(ctx, job_id, body, principal)
    ctx.self_metrics.count_ingest("job_profiles", "accepted")
    return profiles.public(row)


@router.get("/{job_id}/profiles", response_model=ProfilesPublic)
def read_profiles(
    job_id: JobIdPath, ctx: ContextDep, limit: Annotated[int, Query(ge=1, le=100)] = 10
) -> ProfilesPublic:
    """A job's latest profiles, newest first, with the figures over the ranks that answered."""
    data = list(profiles.read_profiles(ctx, job_id, limit=limit))
    return ProfilesPublic(data=data, count=len(data))
