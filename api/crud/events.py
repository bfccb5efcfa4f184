"""Job event rows."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from api.db.models import JobEvent


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
        JobEvent(
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


def read_events(*, session: Session, job_id: str, limit: int) -> list[JobEvent]:
    stmt = select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id.desc()).limit(limit)
    return list(reversed(session.scalars(stmt).all()))


def prune_events(*, session: Session, older_than: float) -> int:
    result = session.execute(delete(JobEvent).where(JobEvent.received_at < older_than))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
