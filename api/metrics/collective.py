"""NCCL Inspector's collectives on ``/metrics`` (issue 61): their families and how they are rendered, together.

Per visible job, summed over the nodes whose agents read Inspector output for it: GPU-seconds in collective kernels
and operations per process group and collective kind (counters, from the agents' counters: an agent restart shows
as a counter reset, which ``rate()`` takes), records NCCL overwrote before they were read, and each group's bus
bandwidth over the agents' last interval (bus bytes ÷ GPU-timed seconds, NCCL's definition). From the per-rank
figures (:mod:`mfumon.api.state.collective_ranks`), bounded per job: the ranks their peers wait for (a late rank's
kernel is the shortest: its lag is how much longer the communicator's median rank spends in the kernel per
operation), and per pair of nodes its weakest point-to-point GPU pair against what NVLink or the ports carry.
Rendered on every scrape (shard 0) from the node views held; series of ended jobs and vanished nodes disappear with
them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Container, Iterable

from mfumon.api.metrics._text import counter, declare, gauge, labels_text, sample_line
from mfumon.api.state.collective_ranks import JobRanks, node_pairs
from mfumon.api.state.collectives import job_groups
from mfumon.api.state.views import NodeView

#: Ranks exported per job, group and collective: those with the largest lag (a positive one), the rest on the page.
RANKS_EXPORTED = 3
#: Node pairs exported per job: those with the weakest links.
LINKS_EXPORTED = 16

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
    gauge(
        "job_collective_rank_lag_seconds",
        "Per operation, how much longer the communicator's median rank spends in the collective kernel than this "
        "rank: its peers wait for it (a late rank's own kernel is the shortest). The largest 3 per group and "
        "collective.",
    ),
    gauge(
        "job_link_bus_bandwidth_bytes_per_second",
        "Point-to-point bus bandwidth of the weakest GPU pair between two nodes (node = peer_node: inside one), over "
        "the agents' last interval, both directions.",
    ),
    gauge(
        "job_link_expected_ratio",
        "That GPU pair's bandwidth / what the fabric carries (NVLink one way inside a node, the weaker end's ports "
        "per GPU across nodes); only with messages of 8 MiB or more on average and a known figure.",
    ),
)


def render_collectives(
    nodes: Iterable[NodeView],
    jobs: Container[str],
    nvlink_of: Callable[[NodeView], float | None] = lambda node: None,
) -> str:
    """The visible ``jobs``' collective series; every family's header even when no node reads Inspector output.
    ``nvlink_of``: the NVLink figure of a node's device (:func:`~mfumon.api.state.collective_ranks.nvlink_of`)."""
    nodes = tuple(nodes)
    by_op: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for node in nodes:
        for row in node.collectives or ():
            if row.job_id in jobs:
                op = by_op[(row.job_id, row.group, row.collective)]
                op[0] += row.seconds_total
                op[1] += row.operations_total
                op[2] += row.bus_bytes_total
    by_group = job_groups(nodes, jobs)
    ranked = _rank_series(nodes, jobs, nvlink_of)
    op_labels = {key: labels_text(zip(("job_id", "group", "collective"), key, strict=True)) for key in sorted(by_op)}
    group_labels = {key: labels_text(zip(("job_id", "group"), key, strict=True)) for key in sorted(by_group)}
    series: dict[str, list[tuple[str, float]]] = {
        "mfumon_job_collective_seconds_total": [(op_labels[k], by_op[k][0]) for k in op_labels],
        "mfumon_job_collective_operations_total": [(op_labels[k], by_op[k][1]) for k in op_labels],
        "mfumon_job_collective_bus_bytes_total": [(op_labels[k], by_op[k][2]) for k in op_labels],
        "mfumon_job_collective_records_lost_total": [(group_labels[k], by_group[k].lost) for k in group_labels],
        "mfumon_job_collective_bus_bandwidth_bytes_per_second": [
            (group_labels[k], value) for k in group_labels if (value := by_group[k].bus_bandwidth) is not None
        ],
        "mfumon_job_collective_time_ratio": [
            (group_labels[k], value) for k in group_labels if (value := by_group[k].time_ratio) is not None
        ],
        **ranked,
    }
    return "".join(
        family.header() + "".join(sample_line(name, labels, value) for labels, value in series[name])
        for name, family in COLLECTIVE_FAMILIES.items()
    )


_RANK_LABELS = ("job_id", "group", "collective", "node", "rank")
_LINK_LABELS = ("job_id", "group", "node", "peer_node")


def _rank_series(
    nodes: tuple[NodeView, ...], jobs: Container[str], nvlink_of: Callable[[NodeView], float | None]
) -> dict[str, list[tuple[str, float]]]:
    """The per-rank families: each job's figures from its own nodes only (one pass to find them)."""
    of_job: dict[str, list[NodeView]] = defaultdict(list)
    for view in nodes:
        for job_id in {row.job_id for row in view.collective_ranks or ()}:
            if job_id in jobs:
                of_job[job_id].append(view)
    lags: list[tuple[str, float]] = []
    bandwidths: list[tuple[str, float]] = []
    ratios: list[tuple[str, float]] = []
    for job_id in sorted(of_job):
        held: dict[tuple[str, str, str, int], float] = {}  # a (node, rank) of several communicators: its largest
        shown: dict[tuple[str, str], int] = defaultdict(int)
        ranks = JobRanks(of_job[job_id], job_id)
        for waited in ranks.waited(waiting_only=True):  # the largest lag first
            key = (waited.group, waited.collective, waited.node, waited.rank)
            if waited.lag_seconds <= 0 or key in held or shown[key[:2]] >= RANKS_EXPORTED:
                continue
            held[key] = waited.lag_seconds
            shown[key[:2]] += 1
        for (group, collective, node, rank), lag in held.items():
            values = (job_id, group, collective, node, str(rank))
            lags.append((labels_text(zip(_RANK_LABELS, values, strict=True)), lag))
        for link in node_pairs(ranks.links(nvlink_of))[:LINKS_EXPORTED]:
            ends = (job_id, link.group, link.node, link.peer_node)
            labels = labels_text(zip(_LINK_LABELS, ends, strict=True))
            if link.bus_bandwidth is not None:
                bandwidths.append((labels, link.bus_bandwidth))
            if link.judged and link.expected_ratio is not None:
                ratios.append((labels, link.expected_ratio))
    return {
        "mfumon_job_collective_rank_lag_seconds": lags,
        "mfumon_job_link_bus_bandwidth_bytes_per_second": bandwidths,
        "mfumon_job_link_expected_ratio": ratios,
    }
