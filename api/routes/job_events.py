"""Job event routes: a job tells how its time goes (start-up, checkpoints, evaluation, restarts, failures)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from mfumon.api.deps import ContextDep, JobIdPath, JobWriter, reject_future_timestamp
from mfumon.api.route_table import route_spec
from mfumon.api.schemas.events import JobEventCreate, JobEventPublic, JobEventResult, JobEventsPublic
from mfumon.api.services import events
from mfumon.api.services.events import record_event

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post("/{job_id}/events", response_model=JobEventResult)
@route_spec("jobs", endpoint="job_events")
def create_event(job_id: JobIdPath, body: JobEventCreate, ctx: ContextDep, principal: JobWriter) -> JobEventResult:
    """Record a job event: init, checkpoint_save, checkpoint_load, eval, restart or failure."""
    if body.timestamp is not None:
        reject_future_timestamp(ctx, body.timestamp)
    result = record_event(ctx, job_id, body, principal)
    ctx.self_metrics.count_ingest("job_events", "accepted")
    return result


@router.get("/{job_id}/events", response_model=JobEventsPublic)
def read_events(
    job_id: JobIdPath, ctx: ContextDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
) -> JobEventsPublic:
    """A job's latest events, oldest first, including the restarts the aggregator inferred."""
    rows = events.read_events(ctx, job_id, limit=limit)
    data = [JobEventPublic.model_validate(row, from_attributes=True) for row in rows]
    return JobEventsPublic(data=data, count=len(data))
