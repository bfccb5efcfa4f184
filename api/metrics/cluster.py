"""The cluster's, pools' and teams' series on ``/metrics``: their families and how they are rendered, side by side.

Few series, derived from the whole snapshot's summary (:func:`mfumon.api.state.aggregate.summarize`), so rendered
afresh on every scrape (shard 0 only) rather than cached.
"""

from __future__ import annotations

from collections.abc import Callable

from mfumon.api.metrics._text import Rows, declare, family_text, gauge
from mfumon.api.state.aggregate import GroupTotals, Summary

CLUSTER_FAMILIES = declare(
    gauge("cluster_mfu_ratio", "Sum of jobs' model FLOP/s / dense peak of every known GPU (idle GPUs count)."),
    gauge("cluster_allocated_mfu_ratio", "Sum of jobs' model FLOP/s / dense peak of the GPUs jobs hold."),
    gauge(
        "cluster_model_flops_per_second",
        "Useful FLOP/s: reporting jobs' model FLOP/s on their GPUs plus hardware estimates of unreported GPUs.",
    ),
    gauge("cluster_peak_flops_per_second", "Dense peak FLOP/s of the busy GPUs with a number plus idle GPUs (bf16)."),
    gauge("cluster_gpus", "GPUs exporters report, by state (reporting, unreported, idle, down): they add up to all."),
    gauge("cluster_gpus_unknown_model", "GPUs exporters report whose model has no peak in the table."),
    gauge("cluster_gpus_unverified", "GPUs that job reports claim and no exporter confirms (counted in no state)."),
    gauge("cluster_jobs_gpu_mismatch", "Reporting jobs whose num_gpus differs from the GPUs exporters attribute."),
    gauge("cluster_reported_coverage_ratio", "GPUs in reporting jobs / busy GPUs: the share of MFU not estimated."),
    gauge("cluster_nodes", "Nodes whose exporters pushed within the node TTL."),
    gauge("cluster_jobs", "Jobs by status (running, pending)."),
    gauge("pool_mfu_ratio", "Pool MFU: its jobs' model FLOP/s / peak of its jobs' GPUs and its idle GPUs."),
    gauge("pool_resource_satisfaction_ratio", "GPUs allocated / GPUs requested by the pool's jobs."),
    gauge("pool_gpus", "GPUs of the pool's nodes, by state (reporting, unreported, idle, down)."),
    gauge("pool_reported_coverage_ratio", "GPUs in reporting jobs / busy GPUs, in the pool's nodes."),
    gauge("pool_gpus_allocated", "GPUs exporters attribute to the pool's jobs."),
    gauge("pool_gpus_requested", "GPUs requested by the pool's running and pending jobs."),
    gauge("pool_jobs_pending", "Jobs registered in the pool that hold no GPUs yet."),
    gauge("team_mfu_ratio", "Team MFU over the GPUs its running jobs hold."),
    gauge("team_gpus_allocated", "GPUs held by the team's running jobs."),
)


def render_cluster(summary: Summary) -> str:
    """The cluster's, then each pool's, then each team's series."""
    out: list[str] = []

    def emit(name: str, rows: Rows) -> None:
        out.append(family_text(CLUSTER_FAMILIES[name], rows))

    cluster = summary.cluster
    emit("mfumon_cluster_mfu_ratio", [([], cluster.mfu)])
    emit("mfumon_cluster_allocated_mfu_ratio", [([], cluster.allocated_mfu)])
    emit("mfumon_cluster_model_flops_per_second", [([], cluster.model_flops_per_second)])
    peak = cluster.peak_flops_per_second + cluster.idle_peak_flops_per_second
    emit("mfumon_cluster_peak_flops_per_second", [([], peak)])
    emit("mfumon_cluster_gpus", [([("state", s)], n) for s, n in cluster.states().items()])
    emit("mfumon_cluster_gpus_unknown_model", [([], summary.gpus_unknown_model)])
    emit("mfumon_cluster_gpus_unverified", [([], summary.gpus_unverified)])
    emit("mfumon_cluster_jobs_gpu_mismatch", [([], summary.jobs_gpu_mismatch)])
    emit("mfumon_cluster_reported_coverage_ratio", [([], cluster.reported_coverage)])
    emit("mfumon_cluster_nodes", [([], summary.nodes)])
    jobs = [
        ([("status", "running")], cluster.jobs_running),
        ([("status", "pending")], cluster.jobs_pending),
    ]
    emit("mfumon_cluster_jobs", jobs)
    pools = sorted(summary.pools.items())
    emit("mfumon_pool_mfu_ratio", per_group("pool", pools, lambda g: g.mfu))
    emit("mfumon_pool_resource_satisfaction_ratio", per_group("pool", pools, lambda g: g.resource_satisfaction))
    emit(
        "mfumon_pool_gpus",
        [([("pool", p), ("state", s)], n) for p, group in pools for s, n in group.states().items()],
    )
    emit("mfumon_pool_reported_coverage_ratio", per_group("pool", pools, lambda g: g.reported_coverage))
    emit("mfumon_pool_gpus_allocated", per_group("pool", pools, lambda g: g.gpus_allocated))
    emit("mfumon_pool_gpus_requested", per_group("pool", pools, lambda g: g.gpus_requested))
    emit("mfumon_pool_jobs_pending", per_group("pool", pools, lambda g: g.jobs_pending))
    teams = sorted(summary.teams.items())
    emit("mfumon_team_mfu_ratio", per_group("team", teams, lambda g: g.allocated_mfu))
    emit("mfumon_team_gpus_allocated", per_group("team", teams, lambda g: g.gpus_allocated))
    return "".join(out)


def per_group(
    label: str, groups: list[tuple[str, GroupTotals]], value: Callable[[GroupTotals], float | None]
) -> list[tuple[list[tuple[str, str]], float | None]]:
    """One row per group, labelled ``label="<its name>"``."""
    return [([(label, name)], value(group)) for name, group in groups]
