"""Two jobs before and after: the figures an optimisation should move (MFU, throughput per GPU, goodput) and
where their allocated time went, share by share.

A running job is read from its ledger; an ended one from the summary frozen at its end, so a comparison still
works after its history is pruned. ``mfu`` is the reported MFU averaged over the time the reports cover (one slow
report does not decide it); ``tokens_per_second_per_gpu`` is the same figure as throughput, ``mfu`` x the device's
dense peak ÷ FLOPs per token, which equals the time-weighted tokens/s per GPU while model and device stay the same.
"""

from __future__ import annotations

from typing import Any

from mfumon.api.accounting import CATEGORIES, Ledger
from mfumon.api.context import AppContext
from mfumon.api.crud import jobs as crud
from mfumon.api.db.tables import JobRow
from mfumon.api.errors import NotFoundError
from mfumon.api.schemas.compare import ComparePublic, CompareRow, CompareSide, WaterfallDelta
from mfumon.api.state.outcome import ReportOutcome


def _figures(job: JobRow) -> tuple[dict[str, float | None], dict[str, float], str]:
    """The job's comparable figures, its waterfall (category -> GPU-seconds), and where they came from."""
    latest = ReportOutcome.from_json(job.latest) or ReportOutcome()
    summary = job.summary if job.status == "ended" and job.summary else None
    if summary is not None:
        source = "summary"
        totals = {str(e["category"]): float(e["gpu_seconds"]) for e in summary.get("waterfall") or ()}
        mfu, lifetime, compute, goodput = (
            summary.get(k) for k in ("time_weighted_mfu", "lifetime_mfu", "compute_mfu", "goodput_ratio")
        )
    else:
        source = "ledger"
        ledger = Ledger.from_json(job.accounting)
        totals = dict(ledger.waterfall())
        mfu, lifetime, compute, goodput = (
            ledger.time_weighted_mfu,
            ledger.lifetime_mfu,
            ledger.compute_mfu,
            ledger.goodput,
        )
    if mfu is None:
        mfu = latest.mfu
    per_gpu = None
    peak, flops_per_token = latest.peak_flops_per_gpu, latest.flops_per_token
    if mfu is not None and peak and flops_per_token:
        per_gpu = mfu * peak / flops_per_token
    figures: dict[str, float | None] = {
        "mfu": mfu,
        "tokens_per_second_per_gpu": per_gpu,
        "latest_mfu": latest.mfu,
        "lifetime_mfu": lifetime,
        "compute_mfu": compute,
        "goodput_ratio": goodput,
        "gpu_hours": sum(totals.values()) / 3600.0,
        "num_gpus": float(job.num_gpus) if job.num_gpus is not None else None,
        "restarts": float(job.restarts or 0),
        "failures": float(job.failures or 0),
    }
    return figures, totals, source


def _side(ctx: AppContext, job: JobRow, source: str) -> CompareSide:
    latest = ReportOutcome.from_json(job.latest) or ReportOutcome()
    signature = latest.signature
    baseline = ctx.state.baseline(signature) if signature else None
    return CompareSide(
        job_id=job.job_id,
        status=job.status,
        kind=job.kind,
        source=source,
        signature=signature,
        device=latest.device,
        num_gpus=job.num_gpus,
        dtype=job.dtype,
        model=job.model,
        started_at=job.started_at,
        ended_at=job.ended_at,
        outcome=job.outcome,
        baseline_mfu=baseline.mfu if baseline else None,
    )


def _row(metric: str, a: float | None, b: float | None) -> CompareRow:
    both = a is not None and b is not None
    return CompareRow(
        metric=metric,
        a=a,
        b=b,
        delta=b - a if both else None,  # type: ignore[operator]
        ratio=b / a if both and a else None,  # type: ignore[operator]
    )


def _share(part: float, total: float) -> float | None:
    return part / total if total > 0 else None


def compare(ctx: AppContext, a: str, b: str) -> ComparePublic:
    """Raises :class:`NotFoundError` naming the job that does not exist."""
    with ctx.sessions() as session:
        jobs: dict[str, JobRow] = {}
        for job_id in dict.fromkeys((a, b)):
            job = crud.read_job(session=session, job_id=job_id)
            if job is None:
                raise NotFoundError(f"job {job_id!r} not found")
            jobs[job_id] = job
        (fa, wa, sa), (fb, wb, sb) = _figures(jobs[a]), _figures(jobs[b])
        side_a, side_b = _side(ctx, jobs[a], sa), _side(ctx, jobs[b], sb)
    total_a, total_b = sum(wa.values()), sum(wb.values())
    categories: list[Any] = list(dict.fromkeys([*CATEGORIES, *wa, *wb]))
    waterfall = []
    for category in categories:
        share_a, share_b = _share(wa.get(category, 0.0), total_a), _share(wb.get(category, 0.0), total_b)
        waterfall.append(
            WaterfallDelta(
                category=category,
                a_gpu_seconds=wa.get(category, 0.0),
                b_gpu_seconds=wb.get(category, 0.0),
                a_share=share_a,
                b_share=share_b,
                share_delta=share_b - share_a if share_a is not None and share_b is not None else None,
            )
        )
    return ComparePublic(
        a=side_a,
        b=side_b,
        same_signature=side_a.signature is not None and side_a.signature == side_b.signature,
        rows=[_row(metric, fa[metric], fb[metric]) for metric in fa],
        waterfall=waterfall,
    )
