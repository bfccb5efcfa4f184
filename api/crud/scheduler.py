"""Rows a scheduler sync reads and writes: the source row (its lock), its jobs, and queue-wait histograms."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from mfumon.api.crud._upsert import upsert_rows
from mfumon.api.db.tables import JobRow, QueueWaitHistogramRow, SchedulerSourceRow
from mfumon.api.state.views import QUEUE_WAIT_BUCKETS

_CHUNK = 500  # ids per IN (...) list: well inside every database's parameter limit


def lock_source(*, session: Session, name: str, kind: str, now: float) -> SchedulerSourceRow:
    """The source's row, created if new and locked: syncs of one source run one after another."""
    row = {"name": name, "kind": kind, "observed_at": 0.0, "synced_at": now, "quotas": [], "updated_at": now}
    upsert_rows(session, SchedulerSourceRow.__table__, [row], key=["name"], update=[])  # type: ignore[arg-type]
    return session.scalars(select(SchedulerSourceRow).where(SchedulerSourceRow.name == name).with_for_update()).one()


def read_sources(*, session: Session) -> list[SchedulerSourceRow]:
    return list(session.scalars(select(SchedulerSourceRow).order_by(SchedulerSourceRow.name)))


def existing_job_ids(*, session: Session, job_ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(job_ids), _CHUNK):
        chunk = job_ids[start : start + _CHUNK]
        found.update(session.scalars(select(JobRow.job_id).where(JobRow.job_id.in_(chunk))))
    return found


def lock_jobs(*, session: Session, source: str, job_ids: Sequence[str]) -> dict[str, JobRow]:
    """The jobs named in the sync plus the source's jobs still open, locked for update."""
    jobs: dict[str, JobRow] = {}
    for job in session.scalars(
        select(JobRow)
        .where(JobRow.source == source, JobRow.status != "ended")
        .order_by(JobRow.job_id)
        .with_for_update()
    ):
        jobs[job.job_id] = job
    missing = sorted(set(job_ids) - set(jobs))
    for start in range(0, len(missing), _CHUNK):
        chunk = missing[start : start + _CHUNK]
        stmt = select(JobRow).where(or_(JobRow.job_id.in_(chunk))).order_by(JobRow.job_id).with_for_update()
        for job in session.scalars(stmt):
            jobs[job.job_id] = job
    return jobs


def add_queue_waits(
    *, session: Session, waits: dict[tuple[str, str], list[float]], now: float
) -> list[QueueWaitHistogramRow]:
    """Add observed waits to each (pool, team) histogram, creating it at zero first; returns the rows."""
    empty = [0] * (len(QUEUE_WAIT_BUCKETS) + 1)
    rows = [
        {"pool": pool, "team": team, "buckets": empty, "sum_seconds": 0.0, "count": 0, "updated_at": now}
        for pool, team in sorted(waits)
    ]
    upsert_rows(session, QueueWaitHistogramRow.__table__, rows, key=["pool", "team"], update=[])  # type: ignore[arg-type]
    updated = []
    for pool, team in sorted(waits):
        stmt = select(QueueWaitHistogramRow).where(
            QueueWaitHistogramRow.pool == pool, QueueWaitHistogramRow.team == team
        )
        histogram = session.scalars(stmt.with_for_update()).one()
        buckets = list(histogram.buckets)
        for wait in waits[(pool, team)]:
            index = next((i for i, bound in enumerate(QUEUE_WAIT_BUCKETS) if wait <= bound), len(QUEUE_WAIT_BUCKETS))
            buckets[index] += 1
            histogram.sum_seconds += wait
            histogram.count += 1
        histogram.buckets = buckets
        histogram.updated_at = now
        updated.append(histogram)
    return updated
