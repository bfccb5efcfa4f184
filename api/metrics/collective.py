"""NCCL Inspector's collectives on ``/metrics`` (issue 61): their families and how they are rendered, together.

Per visible job, summed over the nodes whose agents read Inspector output for it: GPU-seconds in collective kernels
and operations per process group and collective kind (counters, from the agents' counters: an agent restart shows
as a counter reset, which ``rate()`` takes), records NCCL overwrote before they were read, and each group's bus
bandwidth over the agents' last interval (bus bytes ÷ GPU-timed seconds, NCCL's definition). Rendered on every scrape
(shard 0) from the node views held; series of ended jobs and vanished nodes disappear with them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Iterable

from mfumon.api.metrics._text import counter, declare, gauge, labels_text, sample_line
from mfumon.api.state.views import NodeView

COLLECTIVE_FAMILIES = declare(
    counter(
        "job_collective_seconds_total",
        "GPU-seconds the job's ranks spent in NCCL collective kernels (GPU-timed), by process group and collective.",
    ),
    counter("job_collective_operations_total", "NCCL operations the job's ranks completed, by group and collective."),
    counter(
        "job_collective_bus_bytes_total",
        "Bytes the job's collectives moved as NCCL's bus bandwidth counts them (traffic x the bus factor).",
    ),
    counter(
        "job_collective_records_lost_total",
        "Inspector records NCCL overwrote before the agent read them (not in the other figures), by group.",
    ),
    gauge(
        "job_collective_bus_bandwidth_bytes_per_second",
        "The group's bus bandwidth over the agents' last read interval: bus bytes / GPU-timed seconds.",
    ),
    gauge(
        "job_collective_time_ratio",
        "Share of the group's ranks' time in its collective kernels (overlapped or not) over the last interval.",
    ),
)


def render_collectives(nodes: Iterable[NodeView], jobs: Container[str]) -> str:
    """The visible ``jobs``' collective series; every family's header even when no node reads Inspector output."""
    by_op: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    by_group: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # lost, window s, bytes
    capacity: dict[tuple[str, str], float] = defaultdict(float)
    for node in nodes:
        largest: dict[tuple[str, str], float] = {}
        for row in node.collectives or ():
            if row.job_id not in jobs:
                continue
            key = (row.job_id, row.group)  # every kind of a group runs on its ranks: the largest row's capacity
            largest[key] = max(largest.get(key, 0.0), row.ranks * row.interval_seconds)
            op = by_op[(row.job_id, row.group, row.collective)]
            op[0] += row.seconds_total
            op[1] += row.operations_total
            op[2] += row.bus_bytes_total
            group = by_group[(row.job_id, row.group)]
            group[0] += row.lost_total
            group[1] += row.window_seconds
            group[2] += row.window_bus_bytes
        for key, value in largest.items():
            capacity[key] += value
    op_labels = {key: labels_text(zip(("job_id", "group", "collective"), key, strict=True)) for key in sorted(by_op)}
    group_labels = {key: labels_text(zip(("job_id", "group"), key, strict=True)) for key in sorted(by_group)}
    series: dict[str, list[tuple[str, float]]] = {
        "mfumon_job_collective_seconds_total": [(op_labels[k], by_op[k][0]) for k in op_labels],
        "mfumon_job_collective_operations_total": [(op_labels[k], by_op[k][1]) for k in op_labels],
        "mfumon_job_collective_bus_bytes_total": [(op_labels[k], by_op[k][2]) for k in op_labels],
        "mfumon_job_collective_records_lost_total": [(group_labels[k], by_group[k][0]) for k in group_labels],
        "mfumon_job_collective_bus_bandwidth_bytes_per_second": [
            (group_labels[k], by_group[k][2] / by_group[k][1]) for k in group_labels if by_group[k][1] > 0
        ],
        "mfumon_job_collective_time_ratio": [
            (group_labels[k], min(1.0, by_group[k][1] / capacity[k])) for k in group_labels if capacity[k] > 0
        ],
    }
    return "".join(
        family.header() + "".join(sample_line(name, labels, value) for labels, value in series[name])
        for name, family in COLLECTIVE_FAMILIES.items()
    )
