"""What a drain cost and saved, in GPU-hours (issue 31 #3), from the audit rows of ``mfumon remediate``.

- *jobs' GPU-hours before the drain*: the node's GPUs running jobs when the drain was recorded x the time from when
  the loop first saw the node on the drain list (``failing_since``) to the drain: the jobs' time stalled or lost to
  the fault before the loop acted, which a person paged at 3 a.m. would have let grow;
- *drained GPU-hours*: the node's GPUs x the time from a done drain (or cordon) to the loop's done resume (uncordon)
  of the node, or to now while it is out: the capacity the loop took, on which the scheduler would otherwise have
  placed new jobs that the fault would have stalled.

Both are also counted, in GPU-seconds, in ``mfumon_remediation_gpu_seconds_total{category}``: ``lost_before_drain``
when a drain is done, ``drained`` when the loop's resume of the node is done (a node still out counts nothing yet).
Both rest on the node's GPU counts as the aggregator saw them when the drain was recorded (``gpus``, ``gpus_busy``);
a node the aggregator did not know then has neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from mfumon.api.db.tables import RemediationRow
from mfumon.api.state.views import NodeView

HOUR = 3600.0
OUT_ACTIONS = frozenset({"drain", "cordon"})
BACK_ACTIONS = frozenset({"resume", "uncordon"})


def node_gpus(node: NodeView | None) -> tuple[int | None, int | None]:
    """(GPUs, GPUs running jobs or other compute work) of a node's current view; (None, None) when unknown."""
    if node is None:
        return None, None
    busy = sum(share.count for share in node.shares.values()) + len(node.shared)  # a shared GPU once
    if node.unattributed is not None:
        busy += node.unattributed.count
    return len(node.gpus), busy


def resumed_at(drains: Iterable[RemediationRow], resumes: Sequence[tuple[str, float]]) -> Mapping[int, float]:
    """Row id of each done drain -> when the first done resume of its node at or after it was done."""
    by_node: dict[str, list[float]] = {}
    for node, at in resumes:  # oldest first
        by_node.setdefault(node, []).append(at)
    out: dict[int, float] = {}
    for row in drains:
        later = next((at for at in by_node.get(row.node, ()) if at >= row.first_at), None)
        if later is not None:
            out[row.id] = later
    return out


def jobs_gpu_hours_before_drain(row: RemediationRow) -> float | None:
    if row.action not in OUT_ACTIONS or row.failing_since is None or row.gpus_busy is None:
        return None
    return row.gpus_busy * max(0.0, row.first_at - row.failing_since) / HOUR


def drained_gpu_hours(row: RemediationRow, resumed: float | None, now: float) -> float | None:
    if row.action not in OUT_ACTIONS or row.outcome != "done" or row.gpus is None:
        return None
    return row.gpus * max(0.0, (resumed if resumed is not None else now) - row.first_at) / HOUR
