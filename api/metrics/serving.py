"""A serving job's series on ``/metrics``: SLO goodput and its targets, request latency percentiles, preemptions,
and the serving waterfall (:mod:`mfumon.api.serving`), declared and rendered together; part of the job's render
(:mod:`mfumon.api.metrics.job`)."""

from __future__ import annotations

from collections.abc import Callable

from mfumon.api.accounting import Ledger
from mfumon.api.metrics._text import counter, declare, gauge, labels_text
from mfumon.api.serving import SERVING_CATEGORIES, serving_waterfall
from mfumon.api.serving.figures import HISTOGRAMS, QUANTILES
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.views import JobView

SERVING_FAMILIES = declare(
    gauge(
        "job_slo_goodput_ratio",
        "Serving: at least this share of the last 5 minutes' requests met both the TTFT and the TPOT target "
        "(lower bound from the engine's histograms).",
    ),
    gauge(
        "job_slo_goodput_upper_ratio",
        "Serving: at most this share of the last 5 minutes' requests met both targets (upper bound).",
    ),
    gauge(
        "job_slo_goodput_requests_per_second",
        "Serving: requests per second that met both targets (the lower bound's share x requests finished).",
    ),
    gauge("job_slo_target_seconds", "Serving: the latency target the job is held to, by target (ttft, tpot)."),
    gauge("job_slo_objective_ratio", "Serving: the share of requests that must meet both targets."),
    gauge("job_requests_per_second", "Serving: requests finished per second over the last 5 minutes."),
    gauge(
        "job_request_latency_seconds",
        "Serving: a latency percentile over the newest report interval (ttft, tpot per request, itl per token, "
        "queue), interpolated inside its histogram bucket.",
    ),
    gauge("job_preemptions_per_second", "Serving: requests the engine preempted per second over the last 5 minutes."),
    counter(
        "job_serving_gpu_seconds_total",
        "Serving: the job's allocated GPU-seconds by serving category (down, idle, prefill, decode, recompute, "
        "busy); they add up to its allocated time.",
    ),
)


def add_serving(add: Callable[..., None], job: JobView, latest: ReportOutcome) -> None:
    """A running serving job's goodput, targets, latencies and preemption rate (none without histograms)."""
    serving = latest.serving
    if serving is None:
        return
    ident = [("job_id", job.job_id), ("kind", job.kind)]
    add("mfumon_job_slo_goodput_ratio", serving.goodput_ratio)
    add("mfumon_job_slo_goodput_upper_ratio", serving.goodput_upper_ratio)
    add("mfumon_job_slo_goodput_requests_per_second", serving.goodput_requests_per_second)
    for target, seconds in (("tpot", serving.tpot_target_seconds), ("ttft", serving.ttft_target_seconds)):
        add("mfumon_job_slo_target_seconds", seconds, labels_text([*ident, ("target", target)]))
    add("mfumon_job_slo_objective_ratio", serving.objective_ratio)
    add("mfumon_job_requests_per_second", serving.requests_per_second)
    for measure in sorted(HISTOGRAMS.values()):
        for name, q in QUANTILES.items():
            labels = labels_text([*ident, ("measure", measure), ("quantile", f"{q:g}")])
            add("mfumon_job_request_latency_seconds", serving.latency.get(f"{measure}_{name}"), labels)
    add("mfumon_job_preemptions_per_second", serving.preemptions_per_second)


def add_serving_waterfall(add: Callable[..., None], job: JobView, ledger: Ledger) -> None:
    """A serving job's serving-waterfall counters, every category (zeros included)."""
    if job.kind != "inference":
        return
    ident = [("job_id", job.job_id), ("kind", job.kind)]
    split = dict(serving_waterfall(ledger.total_gpu_seconds, ledger.serving_gpu_seconds))
    for category in SERVING_CATEGORIES:
        add("mfumon_job_serving_gpu_seconds_total", split[category], labels_text([*ident, ("category", category)]))
