"""Job profile rows: the profiles asked of a job and the ranks' summaries."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mfumon.api.db.tables import JobProfileRow

OPEN = ("requested", "running")


def add_profile(
    *,
    session: Session,
    job_id: str,
    status: str,
    requested_at: float,
    steps: int | None = None,
    ranks: Any = None,
    requested_by: str | None = None,
) -> JobProfileRow:
    row = JobProfileRow(
        job_id=job_id,
        status=status,
        steps=steps,
        ranks=ranks,
        requested_by=requested_by,
        requested_at=requested_at,
        summaries=[],
    )
    session.add(row)
    session.flush()
    return row


def open_profile(*, session: Session, job_id: str) -> JobProfileRow | None:
    """The job's profile asked and not yet answered, if any (at most one at a time)."""
    stmt = (
        select(JobProfileRow)
        .where(JobProfileRow.job_id == job_id, JobProfileRow.status.in_(OPEN))
        .order_by(JobProfileRow.id.desc())
        .limit(1)
    )
    return session.scalars(stmt).first()


def read_profile(*, session: Session, job_id: str, profile_id: int) -> JobProfileRow | None:
    row = session.get(JobProfileRow, profile_id)
    return row if row is not None and row.job_id == job_id else None


def read_profiles(*, session: Session, job_id: str, limit: int) -> list[JobProfileRow]:
    stmt = select(JobProfileRow).where(JobProfileRow.job_id == job_id).order_by(JobProfileRow.id.desc()).limit(limit)
    return list(session.scalars(stmt).all())
