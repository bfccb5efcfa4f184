"""A scheduler sync, end to end: apply one adapter's snapshot of its queue to the jobs, in one transaction.

The scheduler is the ground truth for what a job asked for, where it waits or runs, and its pool and team; job
reports keep their own fields (throughput, model, dtype). Transitions seen between two snapshots:
- pending -> running: the job started; its queue wait (start - eligible, else start - submit) joins the
  histogram of its (pool, team);
- running -> pending, or a higher restart count: the scheduler requeued the same job id: a restart of the same job
  (:func:`mfumon.api.services.lifecycle.restart`, recorded as an inferred ``restart`` event), not a new job;
- listed before, missing now: the job left the scheduler and is ended (:func:`mfumon.api.services.lifecycle.end`, with
  the exit code and state the adapter saw while the scheduler still showed the finished job).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from mfumon.api.context import AppContext
from mfumon.api.crud import scheduler as crud
from mfumon.api.crud.counters import add_to_counters, shard_of
from mfumon.api.crud.jobs import insert_new_jobs
from mfumon.api.db.tables import JobRow, SchedulerSourceRow
from mfumon.api.schemas.scheduler import EndedJob, SchedulerJob, SchedulerSync, SyncResult
from mfumon.api.services import lifecycle
from mfumon.api.state.refresh import histogram_view, job_view, source_view

#: Columns a sync owns; a change to any of them is a change of the job.
_SCHEDULER_COLUMNS = (
    "status",
    "source",
    "gpus_requested",
    "gpus_scheduled",
    "placement",
    "request_units",
    "submitted_at",
    "queued_at",
    "started_at",
    "pending_reason",
    "scheduler_restarts",
    "restarts",
    "pool",
    "team",
    "name",
    "kind",
    "gpu_model",
    "ended_at",
    "exit_code",
    "end_state",
)


@dataclass
class _Changes:
    created: int = 0
    updated: int = 0
    started: int = 0
    requeued: int = 0
    ended: int = 0
    waits: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    increments: lifecycle.Increments = field(default_factory=lifecycle.Increments)


def _columns(job: JobRow) -> tuple[Any, ...]:
    return tuple(getattr(job, name) for name in _SCHEDULER_COLUMNS)


def _apply(
    session: Session,
    job: JobRow,
    listed: SchedulerJob,
    source: str,
    new: bool,
    now: float,
    ttl_seconds: float,
    out: _Changes,
) -> None:
    was = job.status if not new else "new"
    more = listed.restarts > (job.scheduler_restarts or 0) and job.scheduler_restarts is not None
    if not new and (more or (was == "running" and listed.status == "pending")):
        out.requeued += 1
        why = f"the scheduler requeued the job (restart {listed.restarts})"
        lifecycle.restart(session, job, now, out.increments, inferred=why)
        was = "pending" if listed.status == "pending" else "requeued"
    job.source = source
    job.gpus_requested = listed.gpus_requested
    job.request_units = [list(unit) for unit in listed.units] if listed.units else None
    job.submitted_at = listed.submitted_at
    job.queued_at = listed.queued_at
    for name in ("pool", "team", "name", "kind", "gpu_model"):
        value = getattr(listed, name)
        if value is not None:
            setattr(job, name, value)
    job.scheduler_restarts = listed.restarts
    if listed.status == "running":
        job.pending_reason = None
        job.gpus_scheduled = listed.gpus_allocated if listed.gpus_allocated is not None else listed.gpus_requested
        job.placement = dict(listed.placement) if listed.placement else None
        if was != "running":
            if was == "ended":
                lifecycle.restart(session, job, now, out.increments, inferred="the scheduler runs the ended job again")
            job.status = "running"
            job.started_at = listed.started_at or now
            job.ended_at = job.exit_code = job.end_state = None
            # Seen waiting, or new and started since the adapter could last have seen it: one observed wait.
            recent = listed.started_at is not None and now - listed.started_at <= ttl_seconds
            since = listed.queued_at or listed.submitted_at
            if (was == "pending" or (new and recent)) and since is not None and listed.started_at is not None:
                key = (job.pool or "", job.team or "")
                out.waits.setdefault(key, []).append(max(0.0, listed.started_at - since))
                out.started += 1
        elif listed.started_at is not None:
            job.started_at = listed.started_at
    else:
        if was == "ended":
            lifecycle.restart(session, job, now, out.increments, inferred="the scheduler queues the ended job again")
        if was != "new" and job.status == "running":
            job.started_at = None  # requeued: it starts again later
        job.status = "pending"
        job.pending_reason = listed.pending_reason
        job.gpus_scheduled = None
        job.placement = None
        job.ended_at = job.exit_code = job.end_state = None


def _end(job: JobRow, ended: EndedJob | None, now: float, increments: lifecycle.Increments) -> None:
    lifecycle.end(job, now, increments, exit_code=ended.exit_code if ended else None)
    job.end_state = ended.state if ended else None
    job.pending_reason = None


def sync(ctx: AppContext, source: str, body: SchedulerSync) -> SyncResult:
    """Apply ``body`` as the whole current view of scheduler ``source``."""
    now = ctx.clock()
    out = _Changes()
    listed_ids = [job.job_id for job in body.jobs]
    with ctx.sessions.begin() as session:
        row = crud.lock_source(session=session, name=source, kind=body.kind, now=now)
        if body.observed_at < row.observed_at:
            return SyncResult(source=source, applied=False, jobs=len(body.jobs))
        existing = crud.existing_job_ids(session=session, job_ids=listed_ids)
        insert_new_jobs(session=session, job_ids=[i for i in listed_ids if i not in existing], now=now)
        jobs = crud.lock_jobs(session=session, source=source, job_ids=listed_ids)
        changed: list[JobRow] = []
        for listed in body.jobs:
            job = jobs[listed.job_id]
            new = listed.job_id not in existing
            before = _columns(job)
            _apply(session, job, listed, source, new, now, ctx.settings.SCHEDULER_TTL_SECONDS, out)
            if new or _columns(job) != before:
                job.updated_at = now
                changed.append(job)
                out.created += new
                out.updated += not new
        finished = {e.job_id: e for e in body.ended}
        still_listed = set(listed_ids)
        for job_id, job in jobs.items():
            if job_id not in still_listed and job.source == source and job.status != "ended":
                _end(job, finished.get(job_id), now, out.increments)
                job.updated_at = now
                changed.append(job)
                out.ended += 1
        histograms = crud.add_queue_waits(session=session, waits=out.waits, now=now) if out.waits else []
        row.kind = body.kind
        row.observed_at = min(body.observed_at, now)  # a snapshot dated in the future never outranks later ones
        row.synced_at = now
        row.quotas = [q.model_dump() for q in body.quotas]
        row.pools = [p.model_dump() for p in body.pools] if body.pools is not None else None
        row.updated_at = now
        counter_rows = add_to_counters(session, out.increments, shard=shard_of(source), now=now)
        session.flush()
        views = [job_view(job) for job in changed]
        source_state = source_view(row)
        histogram_states = [histogram_view(h) for h in histograms]
    ctx.state.apply_source(source_state)
    ctx.state.counters.apply(counter_rows)
    for view in views:
        ctx.state.apply_job(view)
    for histogram in histogram_states:
        ctx.state.apply_queue_wait(histogram)
    return SyncResult(
        source=source,
        applied=True,
        jobs=len(body.jobs),
        created=out.created,
        updated=out.updated,
        started=out.started,
        requeued=out.requeued,
        ended=out.ended,
        quotas=len(body.quotas),
    )


def read_sources(ctx: AppContext) -> Sequence[SchedulerSourceRow]:
    """Every scheduler source with its last sync, by name."""
    with ctx.sessions() as session:
        return crud.read_sources(session=session)
