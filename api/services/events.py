"""A job event, end to end: store it, move the job's lifecycle, count it durably, update the state."""

from __future__ import annotations

from collections.abc import Sequence

from mfumon.api.accounting import EVENT_CATEGORY
from mfumon.api.context import AppContext
from mfumon.api.core.security import ANONYMOUS, Principal
from mfumon.api.crud import events as event_crud
from mfumon.api.crud import jobs as crud
from mfumon.api.crud.counters import add_to_counters, shard_of
from mfumon.api.db.tables import JobEventRow
from mfumon.api.errors import NotFoundError
from mfumon.api.schemas.events import JobEventCreate, JobEventResult
from mfumon.api.services import accounting, lifecycle
from mfumon.api.state.refresh import job_view


def record_event(
    ctx: AppContext, job_id: str, event: JobEventCreate, principal: Principal = ANONYMOUS
) -> JobEventResult:
    """Store one event; a ``restart`` (or any non-failure event reaching an ended job) begins a new attempt."""
    now = ctx.clock()
    increments = lifecycle.Increments()
    with ctx.sessions.begin() as session:
        job, created = crud.lock_or_create_job(session=session, job_id=job_id, now=now)
        team = principal.job_team(job_id, None, None if created else job.team, exists=not created)
        job.team = team or job.team
        if event.type == "failure":
            lifecycle.record_failure(job, event.exit_code)
            restarted = False
        elif event.type == "restart":
            lifecycle.restart(session, job, now, increments, inferred=None)
            restarted = True
        else:
            restarted = lifecycle.note_activity(session, job, now, increments, what=f"{event.type} event")
        ledger = accounting.ledger_of(job)
        ledger.event(EVENT_CATEGORY[event.type], event.seconds, now)
        if event.type == "checkpoint_save":
            ledger.checkpoint_saved()
        accounting.store_ledger(job, ledger)
        event_crud.add_event(
            session=session,
            job_id=job_id,
            type=event.type,
            received_at=now,
            attempt=job.restarts,
            seconds=event.seconds,
            step=event.step,
            timestamp=event.timestamp,
            exit_code=event.exit_code,
        )
        lifecycle.count_event(increments, job, event.type)
        job.updated_at = now
        rows = add_to_counters(session, increments, shard=shard_of(job_id), now=now)
    ctx.state.apply_job(job_view(job))
    ctx.state.counters.apply(rows)
    return JobEventResult(
        job_id=job_id,
        type=event.type,
        status=job.status,
        restarts=job.restarts,
        failures=job.failures,
        restarted=restarted,
    )


def read_events(ctx: AppContext, job_id: str, *, limit: int) -> Sequence[JobEventRow]:
    """A job's ``limit`` latest events, oldest first; :class:`NotFoundError` when there is no such job."""
    with ctx.sessions() as session:
        if crud.read_job(session=session, job_id=job_id) is None:
            raise NotFoundError(f"job {job_id!r} not found")
        return event_crud.read_events(session=session, job_id=job_id, limit=limit)
