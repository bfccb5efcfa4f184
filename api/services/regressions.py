"""The jobs a software comparison reads, from the database: those of a window that sent a fingerprint (issue 59)."""

from __future__ import annotations

import statistics

from sqlalchemy import select

from mfumon.api.accounting.ledger import Ledger
from mfumon.api.context import AppContext
from mfumon.api.db.tables import JobRow
from mfumon.api.regressions.analysis import ALPHA, MIN_EFFECT, MIN_JOBS, Change, JobRun, find_changes
from mfumon.api.state.outcome import ReportOutcome

METHOD = (
    f"per signature, the jobs on each version of a component, compared by their time-weighted MFU: Welch's t-test, "
    f"called at p < {ALPHA:g} and a change of at least {MIN_EFFECT:.0%}, each side with {MIN_JOBS} jobs or more"
)


def job_run(job: JobRow) -> JobRun | None:
    """The job as the comparison sees it, or None while it has no fingerprint, signature or MFU."""
    if not job.software or job.kind != "training":
        return None
    ledger = Ledger.from_json(job.accounting)
    mfu = ledger.time_weighted_mfu
    latest = ReportOutcome.from_json(job.latest)
    key = latest.signature if latest is not None else None  # the baselines' signature, as the last report had it
    if mfu is None or key is None:
        return None
    steps = list(ledger.recent_step_seconds)
    return JobRun(
        job_id=job.job_id,
        signature=key,
        started_at=job.started_at or job.created_at,
        mfu=mfu,
        gpu_hours=ledger.total_gpu_seconds / 3600.0,
        software=job.software,
        step_seconds=statistics.median(steps) if steps else None,
    )


def read_changes(ctx: AppContext, since: float, until: float) -> list[Change]:
    """Every component step of every signature among the training jobs that started in the window."""
    with ctx.sessions() as session:
        jobs = session.scalars(
            select(JobRow).where(JobRow.software.is_not(None), JobRow.created_at >= since, JobRow.created_at < until)
        ).all()
        runs = [run for run in map(job_run, jobs) if run is not None]
    return find_changes(runs)


def refresh_regressions(ctx: AppContext) -> None:
    """Recompute the comparison over the last ``REGRESSIONS_WINDOW_DAYS`` for /metrics and the diagnosis (every
    ``REGRESSIONS_INTERVAL_SECONDS``, in the maintenance thread; every replica computes the same from the database)."""
    now = ctx.clock()
    ctx.state.regressions = tuple(read_changes(ctx, now - ctx.settings.REGRESSIONS_WINDOW_DAYS * 86400, now))
