"""Job and report-history rows. Lookups return ``None`` for "not found"; routes decide the status."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from mfumon.api.crud._upsert import insert_if_absent, lock_for_write, upsert_rows
from mfumon.api.db.tables import JobReportRow, JobRow
from mfumon.api.schemas.jobs import JobFields

_METADATA_FIELDS = (
    "kind",
    "num_gpus",
    "gpu_model",
    "dtype",
    "peak_flops_per_gpu",
    "gpus_requested",
    "recompute_activations",
    "name",
    "team",
    "pool",
    "weight_dtype",
    "kv_cache_dtype",
    "peak_memory_bandwidth_per_gpu",
)


def read_job(*, session: Session, job_id: str, for_update: bool = False) -> JobRow | None:
    stmt = select(JobRow).where(JobRow.job_id == job_id)
    if for_update:
        lock_for_write(session)
        stmt = stmt.with_for_update()
    return session.scalars(stmt).one_or_none()


def read_jobs(
    *, session: Session, status: str | None = None, limit: int = 100, after: str | None = None, offset: int = 0
) -> list[JobRow]:
    """Jobs in job_id order after ``after`` (a cursor: an index seek, however deep the page)."""
    stmt = select(JobRow).order_by(JobRow.job_id).limit(limit).offset(offset)
    if status is not None:
        stmt = stmt.where(JobRow.status == status)
    if after is not None:
        stmt = stmt.where(JobRow.job_id > after)
    return list(session.scalars(stmt))


def new_job_row(job_id: str, now: float) -> dict[str, Any]:
    """The row of a job seen for the first time: pending, training, bf16, until told otherwise."""
    return {
        "job_id": job_id,
        "status": "pending",
        "kind": "training",
        "dtype": "bf16",
        "created_at": now,
        "reports_received": 0,
        "updated_at": now,
    }


def insert_new_jobs(*, session: Session, job_ids: list[str], now: float) -> None:
    """Insert jobs not there yet; an id another writer inserted meanwhile is left as it is."""
    rows = [new_job_row(job_id, now) for job_id in job_ids]
    for start in range(0, len(rows), 500):
        upsert_rows(session, JobRow.__table__, rows[start : start + 500], key=["job_id"], update=[])  # type: ignore[arg-type]


def lock_or_create_job(*, session: Session, job_id: str, now: float) -> tuple[JobRow, bool]:
    """The job's row, locked for this transaction, created (pending) first if absent; True when this call created it.

    INSERT ... ON CONFLICT DO NOTHING before the locking read waits for a concurrent inserter to commit, so
    concurrent first writes to one id all succeed, one after the other, instead of failing on the primary key.
    """
    created = insert_if_absent(session, JobRow.__table__, new_job_row(job_id, now), key=["job_id"])  # type: ignore[arg-type]
    job = read_job(session=session, job_id=job_id, for_update=True)
    assert job is not None
    return job, created


def apply_job_fields(*, job: JobRow, fields: JobFields) -> None:
    """Copy the metadata fields the client sent; fields it left out keep their stored value."""
    for name in _METADATA_FIELDS:
        value = getattr(fields, name)
        if value is not None:
            setattr(job, name, value)
    if fields.model is not None:
        job.model = fields.model.model_dump(exclude_none=True)
    if fields.parallelism is not None:
        job.parallelism = fields.parallelism.model_dump(exclude_none=True)
    if fields.slo is not None:  # targets left out keep the job's earlier ones
        job.slo = {**(job.slo or {}), **fields.slo.model_dump(exclude_none=True)}
    if fields.software:  # components sent later (a driver the node agent saw) are added to the job's
        job.software = {**(job.software or {}), **fields.software}


def add_report(*, session: Session, job_id: str, received_at: float, values: dict[str, Any]) -> None:
    session.add(JobReportRow(job_id=job_id, received_at=received_at, **values))


def read_history(*, session: Session, job_id: str, limit: int) -> list[JobReportRow]:
    stmt = select(JobReportRow).where(JobReportRow.job_id == job_id).order_by(JobReportRow.id.desc()).limit(limit)
    return list(reversed(session.scalars(stmt).all()))


def read_serving_since(*, session: Session, job_id: str, since: float) -> list[dict[str, Any]]:
    """The ``serving`` figures of the job's reports received at or after ``since``, oldest first."""
    stmt = (
        select(JobReportRow.serving)
        .where(JobReportRow.job_id == job_id, JobReportRow.received_at >= since, JobReportRow.serving.is_not(None))
        .order_by(JobReportRow.received_at)
    )
    return [row for row in session.scalars(stmt).all() if row]


def prune_history(*, session: Session, older_than: float) -> int:
    result = session.execute(delete(JobReportRow).where(JobReportRow.received_at < older_than))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def read_silent_jobs(*, session: Session, silent_since: float, limit: int) -> list[JobRow]:
    """Running jobs with no report (nor metadata update) since ``silent_since``, locked; others' locks skipped."""
    lock_for_write(session)
    last_heard = func.coalesce(JobRow.last_report_at, JobRow.updated_at)
    stmt = (
        select(JobRow)
        # A scheduler adapter's jobs end when the scheduler says so, not for being silent.
        .where(JobRow.status == "running", last_heard < silent_since, JobRow.source.is_(None))
        .order_by(JobRow.job_id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(stmt))
