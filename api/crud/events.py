"""Job event rows."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from mfumon.api.db.tables import JobEventRow


def add_event(
    *,
    session: Session,
    job_id: str,
    type: str,
    received_at: float,
    attempt: int,
    seconds: float | None = None,
    step: int | None = None,
    timestamp: float | None = None,
    exit_code: int | None = None,
    inferred: str | None = None,
) -> None:
    session.add(
        JobEventRow(
            job_id=job_id,
            type=type,
            seconds=seconds,
            step=step,
            timestamp=timestamp,
            received_at=received_at,
            exit_code=exit_code,
            attempt=attempt,
            inferred=inferred,
        )
    )


def read_events(*, session: Session, job_id: str, limit: int) -> list[JobEventRow]:
    stmt = select(JobEventRow).where(JobEventRow.job_id == job_id).order_by(JobEventRow.id.desc()).limit(limit)
    return list(reversed(session.scalars(stmt).all()))


def prune_events(*, session: Session, older_than: float) -> int:
    result = session.execute(delete(JobEventRow).where(JobEventRow.received_at < older_than))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class EventStats:
    """What a job's events add to its diagnosis: checkpoint saves and the exit codes of its failures."""

    checkpoint_saves: int = 0
    checkpoint_save_seconds: float | None = None  # mean over the saves that carried seconds
    exit_codes: tuple[int, ...] = ()  # of the failure events, oldest first


def event_stats(*, session: Session, job_id: str, exit_codes: int = 20) -> EventStats:
    saves, mean = session.execute(
        select(func.count(JobEventRow.id), func.avg(JobEventRow.seconds)).where(
            JobEventRow.job_id == job_id, JobEventRow.type == "checkpoint_save"
        )
    ).one()
    codes = session.scalars(
        select(JobEventRow.exit_code)
        .where(JobEventRow.job_id == job_id, JobEventRow.type == "failure", JobEventRow.exit_code.is_not(None))
        .order_by(JobEventRow.id.desc())
        .limit(exit_codes)
    ).all()
    return EventStats(
        checkpoint_saves=int(saves or 0),
        checkpoint_save_seconds=float(mean) if mean is not None else None,
        exit_codes=tuple(c for c in reversed(codes) if c is not None),
    )
