"""A serving report's figures: its latency histograms against the job's targets, the goodput over the window with
the reports before it, and the inputs of its serving-waterfall tile (:mod:`mfumon.api.serving`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from mfumon.api.context import AppContext
from mfumon.api.crud import jobs as crud
from mfumon.api.db.tables import JobRow
from mfumon.api.schemas.jobs import JobReportCreate
from mfumon.api.serving import (
    WINDOW_SECONDS,
    ServingFigures,
    ServingTile,
    ServingWindow,
    figures_of,
    resolve_targets,
    window_of,
)
from mfumon.api.serving.waterfall import METHOD as WATERFALL_METHOD
from mfumon.api.state.outcome import ReportOutcome, ServingOutcome

__all__ = ["ServingReport", "serving_report", "serving_tile"]


@dataclass(frozen=True, slots=True)
class ServingReport:
    """What a serving report adds to the job: its history figures, the window summary, its tile's inputs."""

    figures: ServingFigures
    window: ServingWindow
    tile: ServingTile

    def outcome(self) -> ServingOutcome:
        return ServingOutcome.from_json(summary(self.window))


def serving_report(
    ctx: AppContext, session: Session, job: JobRow, report: JobReportCreate, outcome: ReportOutcome, now: float
) -> ServingReport | None:
    """The figures of an inference report that splits its phases; None for any other report."""
    if job.kind != "inference" or not report.has_phases():
        return None
    pool = (job.accounting or {}).get("pool") or job.pool
    targets = resolve_targets(job.slo, pool, ctx.settings)
    inference = outcome.inference
    prefill = inference.phase("prefill") if inference else None
    decode = inference.phase("decode") if inference else None
    current = figures_of(
        report,
        targets,
        now,
        prefill_tokens_per_second=prefill.tokens_per_second if prefill else None,
        decode_tokens_per_second=decode.tokens_per_second if decode else None,
        prefill_mfu=prefill.mfu if prefill else None,
        decode_mfu=decode.mfu if decode else None,
        mbu=outcome.mbu,
    )
    earlier = crud.read_serving_since(session=session, job_id=job.job_id, since=now - WINDOW_SECONDS)
    window = window_of([*(ServingFigures.from_json(row) for row in earlier), current], targets, WINDOW_SECONDS)
    good = window.goodput
    current = _with_goodput(current, good.lower, good.upper)
    window = ServingWindow((*window.figures[:-1], current), good, targets)
    return ServingReport(current, window, _tile(report, outcome))


def _with_goodput(figures: ServingFigures, lower: float | None, upper: float | None) -> ServingFigures:
    return replace(figures, slo_goodput_ratio=lower, slo_goodput_upper_ratio=upper)


def serving_tile(job: JobRow, report: JobReportCreate, outcome: ReportOutcome) -> ServingTile | None:
    """Any inference report's serving-waterfall tile (one without the phases splits nothing: ``busy``); None for
    training jobs."""
    return _tile(report, outcome) if job.kind == "inference" else None


def _tile(report: JobReportCreate, outcome: ReportOutcome) -> ServingTile:
    """The tile's split inputs; its GPU-seconds come from the bill (:mod:`~mfumon.api.services.report_billing`)."""
    interval = report.interval_seconds
    inference = outcome.inference
    prefill_weight = decode_weight = recompute_weight = None
    if inference is not None and interval:
        prefill_weight = inference.phase("prefill").mfu
        decode_weight = inference.mbu if inference.mbu is not None else inference.phase("decode").mfu
        context = report.context_tokens or report.mean_prompt_tokens
        if report.preemptions and context and outcome.flops_per_token and outcome.peak_flops_per_second:
            flops = report.preemptions * context * outcome.flops_per_token
            recompute_weight = flops / (outcome.peak_flops_per_second * interval)
    running, waiting = report.requests_running, report.requests_waiting
    return ServingTile(
        serving_gpu_seconds=0.0,
        no_requests=running == 0 and waiting in (0, None) and report.rate() == 0,
        interval_seconds=interval,
        prefill_busy_seconds=report.prefill_busy_seconds,
        decode_busy_seconds=report.decode_busy_seconds,
        prefill_weight=prefill_weight,
        decode_weight=decode_weight,
        recompute_weight=recompute_weight,
    )


def summary(window: ServingWindow) -> dict[str, Any]:
    """The job JSON's ``serving`` object: targets, goodput over the window, the newest interval's latencies, and
    the engine's pressure over the window."""
    latest = window.latest
    seconds = window.goodput.window_seconds
    finished = window.total("requests_finished")
    preemptions = window.total("preemptions")
    latency = dict(latest.percentiles) if latest else {}
    return {
        "engine": latest.engine if latest else None,
        "slo": window.targets.as_json(),
        "slo_goodput": window.goodput.as_json(),
        "latency": latency,
        "latency_over": "the newest report's interval (percentiles interpolated inside their bucket)",
        "requests_per_second": None if finished is None or seconds <= 0 else finished / seconds,
        "preemptions": preemptions,
        "preemptions_per_second": None if preemptions is None or seconds <= 0 else preemptions / seconds,
        "requests_running": window.mean("requests_running"),
        "requests_waiting": window.mean("requests_waiting"),
        "kv_cache_usage_ratio": window.mean("kv_cache_usage"),
        "max_kv_cache_usage_ratio": window.maximum("kv_cache_usage"),
        "batch_size": window.mean("batch_size"),
        "mbu": window.mean("mbu"),
        "prefill_mfu": window.mean("prefill_mfu"),
        "decode_mfu": window.mean("decode_mfu"),
        "window_seconds": seconds,
        "reports": len(window.figures),
        "waterfall_method": WATERFALL_METHOD,
    }
