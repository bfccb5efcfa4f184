"""What the node push carries per rank from NCCL Inspector (issue 61): a batch's per-rank figures as
:class:`~mfumon.exporter.samples.RankCollective` rows, the push's ``collective_ranks``.

Unlike the totals these cover the last interval alone (no counters): the aggregator lines up the ranks of one
communicator from all the job's nodes by its NCCL id. A rank that arrives late to a collective has the shortest
kernels of its communicator (its peers wait in theirs); a slow link is slow in the P2P records of both its ends with
that peer. A row needs the interval it covers, so the first collection (no interval yet, and it may have read a
backlog) pushes none, nor does an interval the aggregator would refuse (none, or over a day).

One row the aggregator refuses costs the whole push, GPU samples included, so rows are left out, never sent broken:
those of pids no job claims and of ops the push does not name, and those whose communicator id, group, job id or
figures are outside what the aggregator accepts (counted as refused). The group is the totals' (:func:`.push_group`).
Past :data:`~mfumon.exporter.samples.MAX_COLLECTIVE_RANKS` the rows with the least kernel time go (counted).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mfumon.exporter.node.nccl_inspector.source import InspectorBatch
from mfumon.exporter.node.nccl_inspector.totals import push_group
from mfumon.exporter.node.nccl_inspector.window import RankFigures
from mfumon.exporter.samples import (
    COLLECTIVE_GROUP,
    COMM_ID,
    MAX_COLLECTIVE_RANKS,
    NCCL_OPERATIONS,
    RankCollective,
    sanitize_id,
)

__all__ = ["MAX_INTERVAL_SECONDS", "RankRows", "rank_collectives"]

#: The longest interval a row may cover (the aggregator's bound on ``interval_seconds``).
MAX_INTERVAL_SECONDS = 86_400.0
# The aggregator's other bounds on a row (``CollectiveRankSample``).
_MAX_RANK = 10_000_000
_MAX_OPERATIONS = 10**12
_MAX_SECONDS = 1e9
_MAX_BYTES = 1e21
_GROUP = re.compile(COLLECTIVE_GROUP)
_COMM_ID = re.compile(COMM_ID)
_OPERATIONS = frozenset(NCCL_OPERATIONS)

_Key = tuple[str, str, str, int, int | None]  # job, comm id, op, rank, peer: the aggregator's key of a row


@dataclass(frozen=True, slots=True)
class RankRows:
    """One batch's ``collective_ranks``, most kernel time first, and what was left out of them."""

    rows: tuple[RankCollective, ...]
    refused: int = 0  # a job's rows with an id, group or figure the aggregator would refuse
    dropped: int = 0  # past the bound


@dataclass(slots=True)
class _Acc:
    group: str
    n_ranks: int = 0
    operations: int = 0
    seconds: float = 0.0
    traffic_bytes: float = 0.0
    bus_bytes: float = 0.0

    def add(self, figures: RankFigures) -> None:
        self.n_ranks = max(self.n_ranks, figures.n_ranks, figures.rank + 1, (figures.peer or 0) + 1)
        self.operations += figures.operations
        self.seconds += figures.seconds
        self.traffic_bytes += figures.traffic_bytes
        self.bus_bytes += figures.bus_bytes

    def acceptable(self) -> bool:
        return (
            self.n_ranks <= _MAX_RANK
            and 0 <= self.operations <= _MAX_OPERATIONS
            and all(math.isfinite(v) for v in (self.seconds, self.traffic_bytes, self.bus_bytes))
            and 0 <= self.seconds <= _MAX_SECONDS
            and 0 <= self.traffic_bytes <= _MAX_BYTES
            and 0 <= self.bus_bytes <= _MAX_BYTES
        )


def rank_collectives(batch: InspectorBatch, *, max_rows: int = MAX_COLLECTIVE_RANKS) -> RankRows:
    """The batch's per-rank figures as the push carries them: one row per (job, communicator id, op, rank, peer)
    (a pid's rows merged with another's of the same key), at most ``max_rows``."""
    interval = batch.interval_seconds
    if interval is None or not 0 < interval <= MAX_INTERVAL_SECONDS:
        return RankRows(())
    accs: dict[_Key, _Acc] = {}
    refused = 0
    for figures in batch.ranks:
        job_id = figures.job_id
        if job_id is None or figures.op not in _OPERATIONS:
            continue
        group = push_group(figures.comm_key, (figures.comm_id,))
        if not _acceptable_key(job_id, group, figures):
            refused += 1
            continue
        key = (job_id, figures.comm_id, figures.op, figures.rank, figures.peer)
        accs.setdefault(key, _Acc(group)).add(figures)
    rows = []
    for (job_id, comm_id, op, rank, peer), acc in accs.items():
        if not acc.acceptable():
            refused += 1
            continue
        rows.append(
            RankCollective(
                job_id=job_id,
                group=acc.group,
                comm_id=comm_id,
                collective=op,
                rank=rank,
                n_ranks=max(1, acc.n_ranks),
                peer=peer,
                operations=acc.operations,
                seconds=acc.seconds,
                traffic_bytes=float(acc.traffic_bytes),
                bus_bytes=float(acc.bus_bytes),
                interval_seconds=float(interval),
            )
        )
    rows.sort(key=_busiest_first)
    return RankRows(tuple(rows[:max_rows]), refused, max(0, len(rows) - max_rows))


def _acceptable_key(job_id: str, group: str, figures: RankFigures) -> bool:
    """Whether the aggregator takes the row's identity: its job id, group, communicator id, rank and peer."""
    peer = figures.peer
    return (
        sanitize_id(job_id) == job_id
        and _GROUP.fullmatch(group) is not None
        and _COMM_ID.fullmatch(figures.comm_id) is not None
        and 0 <= figures.rank <= _MAX_RANK
        and (peer is None or 0 <= peer <= _MAX_RANK)
    )


def _busiest_first(row: RankCollective) -> tuple[float, int, str, str, str, int, int]:
    peer = -1 if row.peer is None else row.peer
    return (-row.seconds, -row.operations, row.job_id, row.comm_id, row.collective, row.rank, peer)
