"""Queues, quotas and fragmentation on ``/metrics``: their families and how they are rendered, side by side.

The numbers come from :mod:`mfumon.api.state.capacity` (mostly scheduler adapters' data) and the started jobs'
queue-wait histograms; few series but one wait per queued job, rendered on every scrape (shard 0 only).
"""

from __future__ import annotations

from mfumon.api.metrics._text import (
    Rows,
    declare,
    family_text,
    format_value,
    gauge,
    histogram,
    labels_text,
    sample_line,
)
from mfumon.api.metrics.cluster import per_group
from mfumon.api.state.aggregate import Summary
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import QUEUE_WAIT_BUCKETS

CAPACITY_FAMILIES = declare(
    gauge("job_queue_wait_seconds", "Seconds a queued job has waited since it became eligible (scheduler jobs)."),
    histogram(
        "started_job_queue_wait_seconds",
        "Queue waits (eligible to start) of scheduler jobs that started, per pool and team.",
    ),
    gauge("pool_gpus_queued", "GPUs requested by the pool's queued jobs (held and blocked jobs excluded)."),
    gauge("pool_max_queue_wait_seconds", "Longest wait among the pool's queued jobs."),
    gauge("pool_free_gpus", "GPUs of the pool's nodes that answer and that no running job holds."),
    gauge("pool_nodes_by_free_gpus", "Nodes of the pool by how many free GPUs they have."),
    gauge(
        "pool_largest_free_block_gpus",
        "Most free GPUs on one node of the pool: the largest one-node request it can place.",
    ),
    gauge(
        "pool_fragmented_gpus",
        "GPUs requested by queued jobs that fit nowhere whole although the pool has that many free GPUs.",
    ),
    gauge("team_gpus_queued", "GPUs requested by the team's queued jobs."),
    gauge("team_max_queue_wait_seconds", "Longest wait among the team's queued jobs."),
    gauge("team_resource_satisfaction_ratio", "GPUs allocated / GPUs requested by the team's running and queued jobs."),
    gauge("team_gpu_quota", "GPUs the team may hold (scheduler quota), in a pool or, without pool, in all pools."),
    gauge("team_gpu_quota_used_ratio", "GPUs held by the team's running jobs / its quota."),
    gauge("scheduler_last_sync_timestamp_seconds", "Unix time the scheduler adapter last synced its queue."),
    gauge("scheduler_jobs", "Jobs the scheduler adapter lists, by status (running, queued, held)."),
)

_SOURCE_STATUSES = ("running", "queued", "held")


def render_capacity(snapshot: Snapshot, summary: Summary) -> str:
    """Queue waits, quotas, fragmentation and scheduler sync series (few, except one wait per queued job)."""
    capacity = summary.capacity
    if capacity is None:
        return ""
    out: list[str] = []

    def emit(name: str, rows: Rows) -> None:
        out.append(family_text(CAPACITY_FAMILIES[name], rows))

    kinds = {job.job_id: job.kind for job in snapshot.jobs}
    emit(
        "mfumon_job_queue_wait_seconds",
        [([("job_id", j), ("kind", kinds[j])], wait) for j, wait in sorted(capacity.queue_waits.items())],
    )
    out.append(_render_queue_wait_histograms(snapshot))
    pools = sorted(capacity.pools.items())
    emit("mfumon_pool_gpus_queued", [([("pool", p)], c.gpus_queued) for p, c in pools])
    emit("mfumon_pool_max_queue_wait_seconds", [([("pool", p)], c.max_queue_wait_seconds) for p, c in pools])
    with_nodes = [(p, c) for p, c in pools if c.free_per_node]
    emit("mfumon_pool_free_gpus", [([("pool", p)], c.free_gpus) for p, c in with_nodes])
    emit(
        "mfumon_pool_nodes_by_free_gpus",
        [([("pool", p), ("free", str(free))], n) for p, c in with_nodes for free, n in c.nodes_by_free().items()],
    )
    emit("mfumon_pool_largest_free_block_gpus", [([("pool", p)], c.largest_free_block) for p, c in with_nodes])
    emit("mfumon_pool_fragmented_gpus", [([("pool", p)], c.fragmented_gpus) for p, c in with_nodes])
    teams = sorted(capacity.teams.items())
    emit("mfumon_team_gpus_queued", [([("team", t)], q.gpus_queued) for t, q in teams])
    emit("mfumon_team_max_queue_wait_seconds", [([("team", t)], q.max_queue_wait_seconds) for t, q in teams])
    emit(
        "mfumon_team_resource_satisfaction_ratio",
        per_group("team", sorted(summary.teams.items()), lambda g: g.resource_satisfaction),
    )
    quota_labels = [([("team", q.team), ("pool", q.pool or "")], q) for q in capacity.quotas]
    emit("mfumon_team_gpu_quota", [(lbl, q.gpus) for lbl, q in quota_labels])
    emit("mfumon_team_gpu_quota_used_ratio", [(lbl, q.used_ratio) for lbl, q in quota_labels])
    sources = sorted(snapshot.sources, key=lambda s: s.name)
    emit(
        "mfumon_scheduler_last_sync_timestamp_seconds",
        [([("source", s.name), ("kind", s.kind)], s.synced_at) for s in sources],
    )
    counts: dict[tuple[str, str], int] = {(s.name, status): 0 for s in sources for status in _SOURCE_STATUSES}
    for job in snapshot.jobs:
        if job.source is not None and job.status != "ended":
            status = "running" if job.status == "running" else "queued" if job.queued else "held"
            counts[(job.source, status)] = counts.get((job.source, status), 0) + 1
    emit("mfumon_scheduler_jobs", [([("source", s), ("status", st)], n) for (s, st), n in sorted(counts.items())])
    return "".join(out)


def _render_queue_wait_histograms(snapshot: Snapshot) -> str:
    name = "mfumon_started_job_queue_wait_seconds"
    lines = [CAPACITY_FAMILIES[name].header()]
    bounds = [*(format_value(b) for b in QUEUE_WAIT_BUCKETS), "+Inf"]
    for histogram_view in sorted(snapshot.queue_waits, key=lambda h: (h.pool, h.team)):
        ident = [("pool", histogram_view.pool), ("team", histogram_view.team)]
        cumulative = 0
        for bound, count in zip(bounds, histogram_view.buckets, strict=True):
            cumulative += count
            lines.append(sample_line(f"{name}_bucket", labels_text([*ident, ("le", bound)]), cumulative))
        lines.append(sample_line(f"{name}_sum", labels_text(ident), histogram_view.sum_seconds))
        lines.append(sample_line(f"{name}_count", labels_text(ident), histogram_view.count))
    return "".join(lines)
