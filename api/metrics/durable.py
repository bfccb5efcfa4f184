"""Durable counters on ``/metrics``: their families and how they are rendered, side by side.

The counters (:mod:`mfumon.api.crud.counters`) are stored in the database in the transaction that stores what they
count, so they survive restarts and every replica exports the same values. Few series: rendered on every scrape
(shard 0 only), from the values this process last read (:class:`mfumon.api.state.counters.DurableCounters`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mfumon.api.accounting import CATEGORIES, CLUSTER_CATEGORIES
from mfumon.api.metrics._text import counter, declare, labels_text, sample_line
from mfumon.api.state.counters import DurableCounters

DURABLE_FAMILIES = declare(
    counter("job_ends_total", "Jobs ended, by kind and outcome (success, failure, unknown, expired)."),
    counter("job_events_total", "Job events received or inferred (restarts), by kind and type."),
    # The waste waterfall (api/accounting): GPU-seconds by category, and FLOPs to put MFU over any window.
    counter(
        "cluster_gpu_seconds_total",
        "GPU-seconds by category: jobs' waterfalls plus idle and unreported GPUs; increase() over any window.",
    ),
    counter("pool_gpu_seconds_total", "GPU-seconds of the pool by category (jobs' waterfalls, idle, unreported)."),
    counter("team_gpu_seconds_total", "GPU-seconds of the team's jobs by waterfall category."),
    counter("cluster_model_flops_total", "Useful model FLOPs of all jobs (work redone after a failure excluded)."),
    counter("pool_model_flops_total", "Useful model FLOPs of the pool's jobs."),
    counter("team_model_flops_total", "Useful model FLOPs of the team's jobs."),
    counter("cluster_peak_flops_total", "Dense peak FLOP/s x allocated seconds of all jobs: the MFU denominator."),
    counter("pool_peak_flops_total", "Dense peak FLOP/s x allocated seconds of the pool's jobs."),
    counter("team_peak_flops_total", "Dense peak FLOP/s x allocated seconds of the team's jobs."),
    counter("cluster_compute_peak_flops_total", "Dense peak FLOP/s x compute seconds of all jobs."),
    counter("pool_compute_peak_flops_total", "Dense peak FLOP/s x compute seconds of the pool's jobs."),
    counter("team_compute_peak_flops_total", "Dense peak FLOP/s x compute seconds of the team's jobs."),
    # Busy without reports, per job and per node: shown while the job or node is visible, like their gauges.
    counter(
        "job_unreported_seconds_total",
        "Seconds the job held GPUs busy without reporting throughput (sampled every accounting interval).",
    ),
    counter("job_unreported_gpu_seconds_total", "GPU-seconds the job's GPUs were busy without throughput reports."),
    counter("node_unattributed_busy_seconds_total", "Seconds the node had GPUs running compute work with no job id."),
    counter("node_unattributed_busy_gpu_seconds_total", "GPU-seconds of the node's GPUs running work with no job id."),
)

_WATERFALL_CATEGORIES = {
    "mfumon_cluster_gpu_seconds_total": CLUSTER_CATEGORIES,
    "mfumon_pool_gpu_seconds_total": CLUSTER_CATEGORIES,
    "mfumon_team_gpu_seconds_total": CATEGORIES,
}
_PER_JOB = ("mfumon_job_unreported_seconds_total", "mfumon_job_unreported_gpu_seconds_total")
_PER_NODE = ("mfumon_node_unattributed_busy_seconds_total", "mfumon_node_unattributed_busy_gpu_seconds_total")
_CATEGORY_LABEL = re.compile(r'^\{(?P<scope>.*?),?category="(?P<category>[^"]*)"\}$')


def render_durable(counters: DurableCounters, *, jobs: Iterable[str] = (), nodes: Iterable[str] = ()) -> str:
    """Durable counters; a scope's GPU-seconds show every category (zeros too) once any of them is non-zero, so
    Prometheus sees each category's first increase. Per-job and per-node series only for the visible ``jobs``
    and ``nodes``: those of ended jobs and vanished nodes disappear (their rows stay, should they come back)."""
    job_prefixes = {labels_text([("job_id", job_id)])[:-1] for job_id in jobs}  # labels end ,kind="..."}
    node_labels = {labels_text([("node", node)]) for node in nodes}
    out = []
    for name, family in DURABLE_FAMILIES.items():
        series = counters.series(name)
        if name in _PER_JOB:
            series = [(labels, v) for labels, v in series if labels.rsplit(",kind=", 1)[0] in job_prefixes]
        elif name in _PER_NODE:
            series = [(labels, v) for labels, v in series if labels in node_labels]
        categories = _WATERFALL_CATEGORIES.get(name)
        if categories is not None:
            values = dict(series)
            scopes = sorted({m.group("scope") for labels, _ in series if (m := _CATEGORY_LABEL.match(labels))})
            series = []
            for scope in scopes:
                prefix = scope + "," if scope else ""
                for category in categories:
                    labels = "{" + prefix + f'category="{category}"' + "}"
                    series.append((labels, values.get(labels, 0.0)))
        out.append(family.header() + "".join(sample_line(name, labels, v) for labels, v in series))
    return "".join(out)
