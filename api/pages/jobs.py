"""What the jobs list and a job's page show, gathered through the services (jobs, diagnosis, events) and the state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mfumon.api.accounting import CATEGORIES, Ledger
from mfumon.api.context import AppContext
from mfumon.api.db.tables import JobRow
from mfumon.api.errors import NotFoundError
from mfumon.api.pages.cluster import MAX_JOBS_READ
from mfumon.api.pages.serving import serving_page
from mfumon.api.pages.svg import Part, Reference, Series, bar_list, line_chart, stacked_bar
from mfumon.api.services import jobs as job_reads
from mfumon.api.services.diagnosis import diagnose_job
from mfumon.api.services.events import read_events
from mfumon.api.state.aggregate import JobAccount, summarize
from mfumon.api.state.outcome import ReportOutcome

HISTORY_REPORTS = 500
EVENTS_SHOWN = 50
STATUSES = ("pending", "running", "ended")
KINDS = ("training", "inference")
FILTERS = ("status", "team", "pool", "kind")


@dataclass(frozen=True, slots=True)
class JobLine:
    """One row of the jobs list."""

    job: JobRow
    latest: ReportOutcome
    account: JobAccount | None
    ledger: Ledger

    @property
    def pool(self) -> str | None:
        return self.job.pool or (self.account.pool if self.account is not None else None)


def mfu_reason(job: JobRow, latest: ReportOutcome) -> str:
    """Why a job has no MFU: the engine's reason for its latest report, or that it never reported."""
    if latest.reason:
        return latest.reason
    return "no report yet" if not job.reports_received else "not computed for the latest report"


def hardware_reason(job: JobRow, account: JobAccount | None) -> str:
    if job.status == "ended":
        return "the job ended: its GPUs are no longer read"
    if account is None or account.gpus_attributed == 0:
        return "no exporter attributes GPUs to this job"
    return "its GPUs report no tensor activity or clocks"


def list_jobs(ctx: AppContext, filters: dict[str, str]) -> tuple[list[JobLine], bool, dict[str, list[str]]]:
    """Jobs matching ``filters`` (status, team, pool, kind; empty means any), whether the read was cut at
    :data:`MAX_JOBS_READ`, and the values each filter can take."""
    status = filters.get("status") or None
    rows = job_reads.read_jobs(ctx, status=status, limit=MAX_JOBS_READ, after=None, offset=0)
    accounts = summarize(ctx.state.snapshot(ctx.clock())).jobs
    lines = [
        JobLine(
            j,
            ReportOutcome.from_json(j.latest) or ReportOutcome(),
            accounts.get(j.job_id),
            Ledger.from_json(j.accounting),
        )
        for j in rows
    ]
    choices = {
        "status": list(STATUSES),
        "kind": list(KINDS),
        "team": sorted({ln.job.team for ln in lines if ln.job.team}),
        "pool": sorted({p for ln in lines if (p := ln.pool)}),
    }
    for key, attr in (("team", "team"), ("kind", "kind")):
        if filters.get(key):
            lines = [ln for ln in lines if getattr(ln.job, attr) == filters[key]]
    if filters.get("pool"):
        lines = [ln for ln in lines if ln.pool == filters["pool"]]
    return lines, len(rows) >= MAX_JOBS_READ, choices


def _mfu_chart(job: JobRow, rows: list[Any], account: JobAccount | None, baseline: float | None) -> Any:
    series = [Series("reported MFU", [(r.received_at, r.mfu) for r in rows], "s0")]
    if any(r.hfu is not None for r in rows):
        series.append(Series("HFU (recomputation counted)", [(r.received_at, r.hfu) for r in rows], "s1"))
    if job.kind == "inference" and any(r.mbu is not None for r in rows):
        series.append(Series("MBU (memory bandwidth)", [(r.received_at, r.mbu) for r in rows], "s2"))
    if job.kind == "inference":
        for phase, css in (("prefill", "s4"), ("decode", "s5")):
            points = [(r.received_at, getattr(r, f"{phase}_mfu")) for r in rows]
            if any(y is not None for _, y in points):
                series.append(Series(f"{phase} MFU", points, css))
    hardware_history = any(r.hardware_mfu is not None for r in rows)
    if hardware_history:
        series.append(Series("hardware estimate", [(r.received_at, r.hardware_mfu) for r in rows], "s3"))
    refs = []
    if not hardware_history and account is not None and account.hardware_mfu is not None:
        refs.append(Reference("hardware estimate now", account.hardware_mfu, "ref hw"))
    if baseline is not None:
        refs.append(Reference("baseline MFU", baseline, "ref base"))
    if not any(y is not None for s in series for _, y in s.points):
        return None
    title = "MFU and MBU over time" if job.kind == "inference" else "MFU over time"
    return line_chart("chart-mfu", title, series, references=refs), series, refs


def waterfall_parts(gpu_seconds: dict[str, float]) -> list[Part]:
    ordered = list(dict.fromkeys([*CATEGORIES, *gpu_seconds]))
    return [Part(c, gpu_seconds.get(c, 0.0), f"wf-{c}", f"{gpu_seconds.get(c, 0.0) / 3600:.2f} GPU-h") for c in ordered]


def job_page(ctx: AppContext, job_id: str) -> dict[str, Any]:
    """The template's context for ``/ui/jobs/{job_id}``; :class:`NotFoundError` for an unknown job."""
    job, history = job_reads.read_job(ctx, job_id, history=HISTORY_REPORTS)
    rows = sorted(history, key=lambda r: r.received_at)
    latest = ReportOutcome.from_json(job.latest) or ReportOutcome()
    account = summarize(ctx.state.snapshot(ctx.clock())).jobs.get(job_id) if job.status != "ended" else None
    held = ctx.state.baseline(latest.signature) if latest.signature else None
    diagnosis = diagnose_job(ctx, job_id)
    if diagnosis is None:  # removed between the two reads
        raise NotFoundError(f"job {job_id!r} not found")
    facts, findings = diagnosis
    mfu_chart = _mfu_chart(job, rows, account, held.mfu if held else None)
    serving = (
        serving_page(job, latest, rows, ctx.settings, mfu_reason(job, latest)) if job.kind == "inference" else None
    )
    parts = waterfall_parts(facts.gpu_seconds)
    gpus = sorted(facts.gpus, key=lambda g: (g.node, g.index))
    tensor = [Part(f"{g.node}/{g.index}", g.tensor_active, "s0") for g in gpus if g.tensor_active is not None]
    return {
        "job": job,
        "latest": latest,
        "account": account,
        "mfu_reason": mfu_reason(job, latest),
        "hardware_reason": hardware_reason(job, account),
        "baseline": held,
        "vs_baseline": latest.mfu / held.mfu if held and latest.mfu is not None and held.mfu > 0 else None,
        "reports": len(rows),
        "latest_report": rows[-1] if rows else None,
        "mfu_chart": mfu_chart,
        "facts": facts,
        "serving": serving,
        "findings": findings,
        "waterfall": parts,
        "waterfall_chart": stacked_bar("chart-waterfall", "Where the allocated GPU-time went", parts)
        if facts.total > 0
        else None,
        "gpus": gpus,
        "tensor_chart": bar_list("chart-tensor", "Tensor-core activity per GPU", tensor, x_max=1.0) if tensor else None,
        "events": read_events(ctx, job_id, limit=EVENTS_SHOWN),
    }
