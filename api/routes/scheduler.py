"""Scheduler adapter routes: ``mfumon scheduler`` puts its whole view of the queue; anyone reads the sources."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from mfumon.api.deps import ContextDep, SchedulerWriter, reject_future_timestamp
from mfumon.api.route_table import route_spec
from mfumon.api.schemas.scheduler import SchedulerSync, SourcePublic, SourcesPublic, SyncResult, TeamQuota
from mfumon.api.services import scheduler as service

router = APIRouter(prefix="/v1/scheduler", tags=["scheduler"])

SourcePath = Annotated[
    str,
    Path(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,63}$",
        description="Name of the scheduler source (one per cluster), e.g. 'slurm' or 'k8s-prod'.",
    ),
]


@router.put("/{source}", response_model=SyncResult)
@route_spec("scheduler", endpoint="scheduler_sync", max_body_bytes="MAX_SCHEDULER_BODY_BYTES")
def sync_source(source: SourcePath, body: SchedulerSync, ctx: ContextDep, _: SchedulerWriter) -> SyncResult:
    """Replace what ``source`` says about its jobs: pending and running jobs, quotas; missing jobs are ended."""
    reject_future_timestamp(ctx, body.observed_at, "observed_at")
    result = service.sync(ctx, source, body)
    ctx.self_metrics.count_ingest("scheduler_sync", "accepted" if result.applied else "stale")
    return result


@router.get("", response_model=SourcesPublic)
def read_sources(ctx: ContextDep) -> SourcesPublic:
    """Every scheduler source with its last sync, the quotas it read and the names of the pools it defines."""
    data = [
        SourcePublic(
            name=r.name,
            kind=r.kind,
            observed_at=r.observed_at,
            synced_at=r.synced_at,
            quotas=[TeamQuota.model_validate(q) for q in r.quotas or []],
            pools=[str(p["name"]) for p in r.pools] if r.pools is not None else None,
        )
        for r in service.read_sources(ctx)
    ]
    return SourcesPublic(data=data, count=len(data))
