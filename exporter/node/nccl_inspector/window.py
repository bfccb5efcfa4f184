"""One read interval's records folded per (pid, communicator, kind, op), with the records NCCL never wrote.

Time and bandwidth come from GPU-timed records only (``kernel_gpu``: the device's own clock over the kernel);
host-timed ones (``kernel_cpu``, ``collective_cpu``, or no timing source) are counted with their seconds apart,
never mixed in. Bus bandwidth is time-weighted: sum of bus bytes over sum of seconds, so a few slow large
operations weigh as much as they cost.

Lost records are gaps in the sequence numbers since the last record seen, per (pid, communicator id, rank, op):
``coll_sn`` is NCCL's count of launches per communicator and op, ``p2p_sn`` (2.30) the plugin's count of recorded
P2P operations per communicator across ops (their gaps go to the op :data:`P2P_ANY`). In 2.28-2.29 the plugin keeps
one slot per communicator, so gaps are normal there: a sample, not a census. In 2.30 they are ring overwrites or
filtered operations (below ``NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES``, no GPU timing). Either way they are counted as
``lost``, never guessed into the totals. A record at the last number seen is a duplicate and left out; one below it
came late (out of order) and counts, but its number was already counted lost.

Beside the rows, the same records per rank (:class:`RankFigures`, per pid, communicator id, op, rank and P2P peer):
what tells one late rank or one slow link from a slow communicator. They take the rows' duplicate verdict, and only
GPU-timed records of ops NCCL defines a bandwidth for: a rank's seconds are its own kernel's on its own clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from mfumon.exporter.node.nccl_inspector.bandwidth import bus_factor, busbw_agrees, traffic_bytes
from mfumon.exporter.node.nccl_inspector.records import COLL_OPS, P2P_OPS, CollRecord, Kind

__all__ = ["P2P_ANY", "OpFigures", "RankFigures", "SequenceTracker", "Window", "aggregate", "merge"]

#: The op of the row that holds lost P2P records: ``p2p_sn`` is one counter for every P2P op of a communicator.
P2P_ANY = "P2P"

_SnKey = tuple[int, str, int, str, str]  # pid, comm id, rank, kind, op (P2P_ANY for p2p)
_RankKey = tuple[int, str, Kind, str, int, int | None]  # pid, comm id, kind, op, rank, peer


@dataclass(frozen=True, slots=True)
class OpFigures:
    """One (job or pid, communicator, kind, op) over one interval."""

    job_id: str | None  # None until joined (and for a pid no job claims)
    pids: tuple[int, ...]
    comm_key: str  # comm_name when given, else comm_id
    comm_ids: tuple[str, ...]
    kind: Kind
    op: str
    known_op: bool  # False for "Invalid" and ops NCCL has no bandwidth for
    ranks: tuple[int, ...]
    n_ranks: int
    nnodes: int
    count: int  # records, every timing source
    gpu_count: int
    gpu_seconds: float
    gpu_traffic_bytes: int
    gpu_bus_bytes: float
    cpu_count: int  # host-timed records, apart
    cpu_seconds: float
    traffic_bytes: int  # every record (NCCL's definition; 0 for an undefined op)
    bus_bytes: float
    lost: int
    late: int = 0
    duplicates: int = 0
    wrapped_sizes: int = 0  # sizes with NCCL's ncclUint8 bug undone
    busbw_disagreements: int = 0  # lines whose busbw is not NCCL's definition of their own size and time
    first_dump_us: int | None = None
    last_dump_us: int | None = None

    @property
    def algbw_gbs(self) -> float | None:
        """Time-weighted algorithm bandwidth of the GPU-timed records (GB/s)."""
        if self.gpu_seconds <= 0 or not self.known_op:
            return None
        return self.gpu_traffic_bytes / 1e9 / self.gpu_seconds

    @property
    def busbw_gbs(self) -> float | None:
        """Time-weighted bus bandwidth of the GPU-timed records (GB/s): sum of bus bytes over sum of seconds."""
        if self.gpu_seconds <= 0 or not self.known_op:
            return None
        return self.gpu_bus_bytes / 1e9 / self.gpu_seconds


@dataclass(slots=True)
class _Acc:
    pids: set[int] = field(default_factory=set)
    comm_ids: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    n_ranks: int = 0
    nnodes: int = 0
    count: int = 0
    gpu_count: int = 0
    gpu_seconds: float = 0.0
    gpu_traffic: int = 0
    gpu_bus: float = 0.0
    cpu_count: int = 0
    cpu_seconds: float = 0.0
    traffic: int = 0
    bus: float = 0.0
    lost: int = 0
    late: int = 0
    duplicates: int = 0
    wrapped: int = 0
    disagreements: int = 0
    first: int | None = None
    last: int | None = None

    def add(self, record: CollRecord) -> None:
        self.pids.add(record.pid)
        self.comm_ids.add(record.comm_id)
        self.ranks.add(record.rank)
        self.n_ranks = max(self.n_ranks, record.n_ranks)
        self.nnodes = max(self.nnodes, record.nnodes)
        traffic = traffic_bytes(record.op, record.msg_size_bytes, record.n_ranks, record.kind) or 0
        bus = traffic * (bus_factor(record.op, record.n_ranks, record.kind) or 0.0)
        seconds = record.exec_time_us / 1e6
        self.count += 1
        self.traffic += traffic
        self.bus += bus
        if record.gpu_timed:
            self.gpu_count += 1
            self.gpu_seconds += seconds
            self.gpu_traffic += traffic
            self.gpu_bus += bus
        else:
            self.cpu_count += 1
            self.cpu_seconds += seconds
        self.wrapped += record.size_wrapped
        self.disagreements += busbw_agrees(record) is False
        stamp = record.dump_timestamp_us
        self.first = stamp if self.first is None else min(self.first, stamp)
        self.last = stamp if self.last is None else max(self.last, stamp)

    def freeze(self, job_id: str | None, comm_key: str, kind: Kind, op: str) -> OpFigures:
        return OpFigures(
            job_id=job_id,
            pids=tuple(sorted(self.pids)),
            comm_key=comm_key,
            comm_ids=tuple(sorted(self.comm_ids)),
            kind=kind,
            op=op,
            known_op=op in (P2P_OPS if kind == "p2p" else COLL_OPS),
            ranks=tuple(sorted(self.ranks)),
            n_ranks=self.n_ranks,
            nnodes=self.nnodes,
            count=self.count,
            gpu_count=self.gpu_count,
            gpu_seconds=self.gpu_seconds,
            gpu_traffic_bytes=self.gpu_traffic,
            gpu_bus_bytes=self.gpu_bus,
            cpu_count=self.cpu_count,
            cpu_seconds=self.cpu_seconds,
            traffic_bytes=self.traffic,
            bus_bytes=self.bus,
            lost=self.lost,
            late=self.late,
            duplicates=self.duplicates,
            wrapped_sizes=self.wrapped,
            busbw_disagreements=self.disagreements,
            first_dump_us=self.first,
            last_dump_us=self.last,
        )


@dataclass(frozen=True, slots=True)
class RankFigures:
    """One rank's GPU-timed operations of one op on one communicator (and, for P2P, one peer) over one interval.

    A rank that arrives late to a collective spends less time in its kernel than its peers, who wait in theirs; a
    slow link shows on both of its ends' P2P records with that peer. Figures as :class:`OpFigures`' ``gpu_*``.
    """

    job_id: str | None  # None until joined (and for a pid no job claims)
    pid: int
    comm_id: str
    comm_key: str  # comm_name when given, else comm_id
    kind: Kind
    op: str
    rank: int  # in the communicator
    n_ranks: int
    peer: int | None  # p2p: the other end's rank in the communicator; None for collectives
    operations: int
    seconds: float  # kernel seconds on the GPU's clock
    traffic_bytes: int  # NCCL's algorithm bytes (per-rank size x ranks for AllGather/ReduceScatter)
    bus_bytes: float  # traffic x NCCL's bus factor


@dataclass(slots=True)
class _RankAcc:
    comm_key: str
    n_ranks: int = 0
    operations: int = 0
    seconds: float = 0.0
    traffic: int = 0
    bus: float = 0.0

    def add(self, record: CollRecord) -> None:
        traffic = traffic_bytes(record.op, record.msg_size_bytes, record.n_ranks, record.kind) or 0
        self.n_ranks = max(self.n_ranks, record.n_ranks)
        self.operations += 1
        self.seconds += record.exec_time_us / 1e6
        self.traffic += traffic
        self.bus += traffic * (bus_factor(record.op, record.n_ranks, record.kind) or 0.0)

    def freeze(self, key: _RankKey) -> RankFigures:
        pid, comm_id, kind, op, rank, peer = key
        return RankFigures(
            job_id=None,
            pid=pid,
            comm_id=comm_id,
            comm_key=self.comm_key,
            kind=kind,
            op=op,
            rank=rank,
            n_ranks=self.n_ranks,
            peer=peer,
            operations=self.operations,
            seconds=self.seconds,
            traffic_bytes=self.traffic,
            bus_bytes=self.bus,
        )


class SequenceTracker:
    """The highest sequence number seen per (pid, communicator id, rank, kind, op), across intervals; bounded (the
    least recently seen keys are forgotten, and their next record starts afresh)."""

    def __init__(self, max_keys: int = 65536) -> None:
        self.max_keys = max_keys
        self._high: OrderedDict[_SnKey, int] = OrderedDict()

    def forget_pid(self, pid: int) -> None:
        """A process's file restarted (truncated, replaced): its numbers start over."""
        for key in [k for k in self._high if k[0] == pid]:
            del self._high[key]

    def observe(self, key: _SnKey, sn: int) -> tuple[int, str]:
        """``(records lost before this one, verdict)`` with verdict ``"new"``, ``"next"``, ``"late"`` or
        ``"duplicate"``; the first record of a key loses nothing (what came before is unknown)."""
        high = self._high.get(key)
        if high is None:
            self._remember(key, sn)
            return 0, "new"
        self._high.move_to_end(key)
        if sn > high:
            self._high[key] = sn
            return sn - high - 1, "next"
        return 0, "duplicate" if sn == high else "late"

    def _remember(self, key: _SnKey, sn: int) -> None:
        self._high[key] = sn
        while len(self._high) > self.max_keys:
            self._high.popitem(last=False)

    def __len__(self) -> int:
        return len(self._high)


@dataclass(frozen=True, slots=True)
class Window:
    """One interval, per (pid, communicator, kind, op), and per rank (GPU-timed records of known ops only)."""

    rows: tuple[OpFigures, ...]
    records: int
    lost: int
    late: int
    duplicates: int
    ranks: tuple[RankFigures, ...] = ()


def aggregate(records: Iterable[CollRecord], tracker: SequenceTracker) -> Window:
    """Fold one interval's records; ``tracker`` carries the sequence numbers over from earlier intervals."""
    accs: dict[tuple[int, str, Kind, str], _Acc] = {}
    rank_accs: dict[_RankKey, _RankAcc] = {}
    ordered = sorted(records, key=lambda r: (r.pid, r.comm_id, r.rank, r.kind, r.sn))
    lost = late = duplicates = 0
    for record in ordered:
        sn_op = P2P_ANY if record.kind == "p2p" else record.op
        gap, verdict = tracker.observe((record.pid, record.comm_id, record.rank, record.kind, sn_op), record.sn)
        if gap:
            accs.setdefault((record.pid, record.comm_key, record.kind, sn_op), _Acc()).lost += gap
            lost += gap
        if verdict == "duplicate":
            accs.setdefault((record.pid, record.comm_key, record.kind, record.op), _Acc()).duplicates += 1
            duplicates += 1
            continue
        acc = accs.setdefault((record.pid, record.comm_key, record.kind, record.op), _Acc())
        acc.add(record)
        if record.gpu_timed and record.known_op:
            rank_key = (record.pid, record.comm_id, record.kind, record.op, record.rank, record.peer)
            rank_accs.setdefault(rank_key, _RankAcc(record.comm_key)).add(record)
        if verdict == "late":
            acc.late += 1
            late += 1
    rows = []
    for (pid, comm_key, kind, op), acc in accs.items():
        acc.pids.add(pid)
        rows.append(acc.freeze(None, comm_key, kind, op))
    ranks = tuple(acc.freeze(key) for key, acc in rank_accs.items())
    return Window(tuple(rows), len(ordered), lost, late, duplicates, ranks)


def merge(job_id: str | None, rows: Iterable[OpFigures]) -> OpFigures:
    """Rows of one (job, communicator, kind, op) from several pids (the ranks on this node) as one."""
    rows = list(rows)
    first = rows[0]
    stamps = [r.first_dump_us for r in rows if r.first_dump_us is not None]
    lasts = [r.last_dump_us for r in rows if r.last_dump_us is not None]
    return OpFigures(
        job_id=job_id,
        pids=tuple(sorted({p for r in rows for p in r.pids})),
        comm_key=first.comm_key,
        comm_ids=tuple(sorted({c for r in rows for c in r.comm_ids})),
        kind=first.kind,
        op=first.op,
        known_op=all(r.known_op for r in rows),
        ranks=tuple(sorted({k for r in rows for k in r.ranks})),
        n_ranks=max(r.n_ranks for r in rows),
        nnodes=max(r.nnodes for r in rows),
        count=sum(r.count for r in rows),
        gpu_count=sum(r.gpu_count for r in rows),
        gpu_seconds=sum(r.gpu_seconds for r in rows),
        gpu_traffic_bytes=sum(r.gpu_traffic_bytes for r in rows),
        gpu_bus_bytes=sum(r.gpu_bus_bytes for r in rows),
        cpu_count=sum(r.cpu_count for r in rows),
        cpu_seconds=sum(r.cpu_seconds for r in rows),
        traffic_bytes=sum(r.traffic_bytes for r in rows),
        bus_bytes=sum(r.bus_bytes for r in rows),
        lost=sum(r.lost for r in rows),
        late=sum(r.late for r in rows),
        duplicates=sum(r.duplicates for r in rows),
        wrapped_sizes=sum(r.wrapped_sizes for r in rows),
        busbw_disagreements=sum(r.busbw_disagreements for r in rows),
        first_dump_us=min(stamps) if stamps else None,
        last_dump_us=max(lasts) if lasts else None,
    )
