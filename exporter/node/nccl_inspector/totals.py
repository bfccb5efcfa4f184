"""What the node push carries from NCCL Inspector (issue 61): each cycle's figures folded into running totals per
(job, process group, collective), as :class:`~mfumon.exporter.samples.CollectiveTotals`.

Totals are counters since the agent started (the aggregator renders them as counters; a restart is a reset). Only
GPU-timed records count towards seconds and bytes, so that bytes ÷ seconds is NCCL's bus bandwidth; host-timed ones
are counted as operations only. Rows of pids no job claims, of operations the push does not name (NCCL's
``Invalid``, the P2P gap row) and of jobs not seen for :data:`FORGET_SECONDS` are left out. A group is the
parallelism the communicator's name says (tp, pp, dp, ep, cp), else the name the framework set, else its NCCL id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mfumon.exporter.node.nccl_inspector.source import InspectorBatch
from mfumon.exporter.parallelism import group_of
from mfumon.exporter.samples import COLLECTIVE_GROUP, MAX_COLLECTIVES, NCCL_OPERATIONS, CollectiveTotals

#: A (job, group, collective) no record came for in this long is dropped from the push: its series end.
FORGET_SECONDS = 300.0
_GROUP = re.compile(COLLECTIVE_GROUP)
_OPERATIONS = frozenset(NCCL_OPERATIONS)


@dataclass(slots=True)
class _Running:
    ranks: int = 0
    n_ranks: int = 0
    operations: int = 0
    seconds: float = 0.0
    traffic_bytes: float = 0.0
    bus_bytes: float = 0.0
    lost: int = 0
    window_seconds: float = 0.0
    window_bus_bytes: float = 0.0
    seen_at: float = 0.0


def push_group(comm_key: str, comm_ids: tuple[str, ...]) -> str:
    """The process group a communicator serves where its name says (``DP Group 0`` -> ``dp``, as the profile summary
    maps PyTorch's and Megatron's group names), else its name as set, else its NCCL id (shared with :mod:`.ranks`)."""
    if comm_key not in comm_ids:  # a name the framework set (2.30 output)
        parallelism = group_of(comm_key)
        if parallelism != "other":
            return parallelism
        if _GROUP.fullmatch(comm_key):  # fullmatch: "$" alone lets a trailing newline through
            return comm_key
    return comm_ids[0] if comm_ids else ""


class RunningTotals:
    """The push's ``collectives``: folded in cycle by cycle, bounded to :data:`MAX_COLLECTIVES` rows."""

    def __init__(self, *, max_rows: int = MAX_COLLECTIVES) -> None:
        self._rows: dict[tuple[str, str, str], _Running] = {}
        self.max_rows = max_rows
        self.dropped = 0  # rows left out of a push past the bound (the least time in collectives first)

    def add(self, batch: InspectorBatch) -> tuple[CollectiveTotals, ...]:
        """Fold in one cycle's batch; the rows to push now."""
        for held in self._rows.values():
            held.window_seconds = held.window_bus_bytes = 0.0
        # A group may be several communicators (one pipeline pair or data-parallel replica each): the node's ranks
        # in it are its processes in any of them (rank numbers repeat across communicators), or a communicator's
        # ranks on the node where one process drives several GPUs, whichever is more; the ranks they reach are each
        # communicator's size, added up.
        processes: dict[tuple[str, str, str], set[int]] = {}
        reach: dict[tuple[str, str, str], dict[str, int]] = {}
        for row in batch.rows:
            if row.job_id is None or row.op not in _OPERATIONS:
                continue
            group = push_group(row.comm_key, row.comm_ids)
            if not _GROUP.fullmatch(group):
                continue
            key = (row.job_id, group, row.op)
            held = self._rows.setdefault(key, _Running())
            processes.setdefault(key, set()).update(row.pids)
            sizes = reach.setdefault(key, {})
            for comm_id in row.comm_ids:
                sizes[comm_id] = max(sizes.get(comm_id, 0), row.n_ranks)
            held.ranks = max(held.ranks, len(processes[key]), len(row.ranks))
            held.n_ranks = max(held.n_ranks, sum(sizes.values()))
            held.operations += row.count
            held.seconds += row.gpu_seconds
            held.traffic_bytes += row.gpu_traffic_bytes
            held.bus_bytes += row.gpu_bus_bytes
            held.lost += row.lost
            held.window_seconds += row.gpu_seconds
            held.window_bus_bytes += row.gpu_bus_bytes
            held.seen_at = batch.timestamp
        self._rows = {k: v for k, v in self._rows.items() if batch.timestamp - v.seen_at <= FORGET_SECONDS}
        ranked = sorted(self._rows.items(), key=lambda item: (-item[1].seconds, item[0]))
        self.dropped += max(0, len(ranked) - self.max_rows)
        interval = batch.interval_seconds or 0.0
        return tuple(
            CollectiveTotals(
                job_id=job_id,
                group=group,
                collective=op,
                ranks=max(1, held.ranks),
                n_ranks=max(1, held.n_ranks, held.ranks),
                operations_total=held.operations,
                seconds_total=held.seconds,
                traffic_bytes_total=held.traffic_bytes,
                bus_bytes_total=held.bus_bytes,
                lost_total=held.lost,
                window_seconds=held.window_seconds,
                window_bus_bytes=held.window_bus_bytes,
                interval_seconds=interval if held.seen_at == batch.timestamp else 0.0,
            )
            for (job_id, group, op), held in ranked[: self.max_rows]
        )
