"""Reading jobs: a page of them, or one with its recent reports (writes are :mod:`mfumon.api.services.reports`)."""

from __future__ import annotations

from collections.abc import Sequence

from mfumon.api.context import AppContext
from mfumon.api.crud import jobs as crud
from mfumon.api.db.tables import JobReportRow, JobRow
from mfumon.api.errors import NotFoundError


def read_jobs(ctx: AppContext, *, status: str | None, limit: int, after: str | None, offset: int) -> Sequence[JobRow]:
    """Jobs in job_id order after the cursor ``after`` (or skipping ``offset``), of one status or all."""
    with ctx.sessions() as session:
        return crud.read_jobs(session=session, status=status, limit=limit, after=after, offset=offset)


def read_job(ctx: AppContext, job_id: str, *, history: int) -> tuple[JobRow, Sequence[JobReportRow]]:
    """The job and its ``history`` newest reports; :class:`NotFoundError` when there is no such job."""
    with ctx.sessions() as session:
        job = crud.read_job(session=session, job_id=job_id)
        if job is None:
            raise NotFoundError(f"job {job_id!r} not found")
        rows = crud.read_history(session=session, job_id=job_id, limit=history) if history else []
    return job, rows
