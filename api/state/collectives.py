"""A job's time in NCCL collectives now, from NCCL Inspector's figures on its nodes (issue 61).

Inspector times each collective's kernels on the GPU; it cannot see whether compute overlapped them. So what it
gives is the share of the ranks' time spent in collective kernels (overlapped or not), per process group, over the
agents' last read interval: Σ GPU-timed seconds ÷ Σ (ranks x interval). Groups whose kernels run at the same time
(tensor- and data-parallel on separate streams) are each counted, so the job's total is capped at 1. The exposed
part comes from profiles, which see the overlap (:func:`exposed_between_profiles`).
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass

from mfumon.api.state.views import CollectiveView, NodeView


@dataclass(slots=True)
class GroupWindow:
    """A job's process group over its agents' last interval: one node's (:func:`node_groups`), or several nodes'
    added up (:meth:`merge`). The one place the per-group sums are made, for ``/metrics``, the diagnosis and the job
    page alike.

    Every collective kind of a group runs on the group's ranks, so a node's ``capacity`` for the group (rank-seconds
    it could spend in collectives) is the ranks x interval of its largest row, not the sum over kinds."""

    seconds: float = 0.0  # GPU-timed seconds in the group's collective kernels, over its ranks
    bus_bytes: float = 0.0
    timed: float = 0.0  # the seconds of rows that cover a known interval (not a first read's backlog)
    capacity: float = 0.0
    lost: int = 0  # records lost, since the agents started
    ranks: int = 0  # on one node: its ranks of the group (the largest row's); merged: summed over nodes
    n_ranks: int = 0  # the communicator's size

    def add(self, row: CollectiveView) -> None:
        self.seconds += row.window_seconds
        self.bus_bytes += row.window_bus_bytes
        self.lost += row.lost_total
        if row.interval_seconds > 0:
            self.timed += row.window_seconds
            self.capacity = max(self.capacity, row.ranks * row.interval_seconds)
        self.ranks = max(self.ranks, row.ranks)
        self.n_ranks = max(self.n_ranks, row.n_ranks)

    def merge(self, other: GroupWindow) -> None:
        """Add another node's figures for the same group."""
        self.seconds += other.seconds
        self.bus_bytes += other.bus_bytes
        self.timed += other.timed
        self.capacity += other.capacity
        self.lost += other.lost
        self.ranks += other.ranks
        self.n_ranks = max(self.n_ranks, other.n_ranks)

    @property
    def bus_bandwidth(self) -> float | None:
        """Bytes/s: bus bytes ÷ GPU-timed seconds (NCCL's definition); None without GPU-timed collectives."""
        return self.bus_bytes / self.seconds if self.seconds > 0 else None

    @property
    def time_ratio(self) -> float | None:
        """The share of the ranks' time in the group's collective kernels, at most 1; None without an interval."""
        return min(1.0, self.timed / self.capacity) if self.capacity > 0 else None


def node_groups(node: NodeView, jobs: Container[str]) -> dict[tuple[str, str], GroupWindow]:
    """The node's figures per (job, group), for the ``jobs`` asked for."""
    out: dict[tuple[str, str], GroupWindow] = {}
    for row in node.collectives or ():
        if row.job_id in jobs:
            out.setdefault((row.job_id, row.group), GroupWindow()).add(row)
    return out


def job_groups(nodes: Iterable[NodeView], jobs: Container[str]) -> dict[tuple[str, str], GroupWindow]:
    """Per (job, group), its nodes' figures added up."""
    out: dict[tuple[str, str], GroupWindow] = {}
    for node in nodes:
        for key, window in node_groups(node, jobs).items():
            out.setdefault(key, GroupWindow()).merge(window)
    return out


def collective_time_ratios(nodes: Iterable[NodeView], job_id: str) -> dict[str, float]:
    """Per group, the share of the job's ranks' time in its collective kernels over the last interval."""
    return {
        group: ratio
        for (_job, group), window in job_groups(nodes, {job_id}).items()
        if (ratio := window.time_ratio) is not None
    }


def exposed_between_profiles(
    ratios: dict[str, float], profile_comm_ratio: float, profile_exposed_ratio: float
) -> float | None:
    """The job's exposed communication share now: Inspector's collective time share (all groups, at most 1) times
    the share of communication the last profile found exposed (not overlapped). None without either."""
    if not ratios or profile_comm_ratio <= 0:
        return None
    return min(1.0, sum(ratios.values())) * min(1.0, profile_exposed_ratio / profile_comm_ratio)
