"""A job's time in NCCL collectives now, from NCCL Inspector's figures on its nodes (issue 61).

Inspector times each collective's kernels on the GPU; it cannot see whether compute overlapped them. So what it
gives is the share of the ranks' time spent in collective kernels (overlapped or not), per process group, over the
agents' last read interval: Σ GPU-timed seconds ÷ Σ (ranks x interval). Groups whose kernels run at the same time
(tensor- and data-parallel on separate streams) are each counted, so the job's total is capped at 1. The exposed
part comes from profiles, which see the overlap (:func:`exposed_between_profiles`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from mfumon.api.state.views import NodeView


def collective_time_ratios(nodes: Iterable[NodeView], job_id: str) -> dict[str, float]:
    """Per group, the share of the job's ranks' time in its collective kernels over the last interval.

    Every collective kind of a group runs on the group's ranks, so a node's capacity for the group is the ranks x
    interval of its largest row, not the sum over kinds."""
    seconds: dict[str, float] = defaultdict(float)
    capacity: dict[str, float] = defaultdict(float)
    for node in nodes:
        largest: dict[str, float] = {}
        for row in node.collectives or ():
            if row.job_id == job_id and row.interval_seconds > 0:
                seconds[row.group] += row.window_seconds
                largest[row.group] = max(largest.get(row.group, 0.0), row.ranks * row.interval_seconds)
        for group, value in largest.items():
            capacity[group] += value
    return {group: min(1.0, seconds[group] / capacity[group]) for group in capacity if capacity[group] > 0}


def exposed_between_profiles(
    ratios: dict[str, float], profile_comm_ratio: float, profile_exposed_ratio: float
) -> float | None:
    """The job's exposed communication share now: Inspector's collective time share (all groups, at most 1) times
    the share of communication the last profile found exposed (not overlapped). None without either."""
    if not ratios or profile_comm_ratio <= 0:
        return None
    return min(1.0, sum(ratios.values())) * min(1.0, profile_exposed_ratio / profile_comm_ratio)
