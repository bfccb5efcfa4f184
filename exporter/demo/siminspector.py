"""A training job's NCCL collectives for ``mfumon demo`` (issue 61), written as NCCL Inspector writes them.

Each simulated rank of a job is a process whose Inspector plugin dumps one JSON line per collective into
``<dir>/<host>-pid<pid>.log``, in NCCL 2.30's format (the header with the communicator's name, ``coll_perf`` with
GPU-timed kernel times and the bandwidths NCCL computes). The demo's node reads that directory through the real
reader (:class:`~mfumon.exporter.node.nccl_inspector.InspectorSource`) and folds it into the real running totals
(:class:`~mfumon.exporter.node.nccl_inspector.totals.RunningTotals`) before each push, so the demo's ``collectives``
come from the same parsing, windowing and totals as a real node's.

A collective's time follows from its size and a bus bandwidth (NCCL's definitions,
:mod:`~mfumon.exporter.node.nccl_inspector.bandwidth`): ``time = traffic x bus factor / bus bandwidth``, with a few
percent of jitter; a node named ``slow_node`` (its network path degraded) runs the collectives and transfers of its
communicators that cross nodes ``slow_factor`` times longer, those inside it at their pace.

A group is one communicator over all the job's ranks unless the spec's ``layout`` splits it (pipeline stages, data
parallel replicas per stage). Pipeline transfers (:class:`SimTransfer`) are ``p2p_perf`` Send and Recv records
between a communicator's consecutive ranks, both ends timed alike.

A job over several nodes runs one :class:`SimInspector` per node, each writing its own ranks' files: global ranks are
numbered node by node (the nodes in name order, ``ranks_per_node`` each), every node names a communicator with the
same id, and a record's ``nnodes`` counts the nodes its communicator spans. Each read writes the *rounds* completed
since the previous one: a step is split into as many equal rounds as its operation counts allow (their greatest
common divisor), so a node whose agent reads more often than a step takes still has records in most intervals, and
the job's nodes can be compared over the same interval.

Two faults the per-rank figures tell apart:

- a *late rank* (``late_rank``): it reaches its communicator's collectives late, so its peers wait in their kernels
  and its own kernel runs only the transfer; its time per operation is ``1 / late_factor`` of theirs, while every
  rank still writes the same message sizes;
- a *slow link* (``slow_link``): the transfers between two ranks run at ``slow_link_gbs`` (both ends see it), the
  other pairs at their healthy bandwidth.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from mfumon.exporter.node.nccl_inspector import InspectorBatch, InspectorSource
from mfumon.exporter.node.nccl_inspector.bandwidth import algbw_gbs, busbw_gbs, traffic_bytes
from mfumon.exporter.node.nccl_inspector.records import Kind

__all__ = ["SimCollective", "SimCollectives", "SimInspector", "SimTransfer"]

#: the simulated ranks' pids: ``PID_BASE + rank`` (a job's ranks on one node)
PID_BASE = 41000
#: a rank's file is removed (after a read) once it is this large, so a long demo does not fill the disk
ROTATE_BYTES = 4 * 1024**2


@dataclass(frozen=True, slots=True)
class SimCollective:
    """One collective a job's step runs ``per_step`` times on ``group``: ``size_bytes`` as NCCL's record carries it
    (per rank for AllGather and ReduceScatter), at ``busbw_gbs`` of bus bandwidth."""

    group: str
    op: str
    per_step: int
    size_bytes: int
    busbw_gbs: float


@dataclass(frozen=True, slots=True)
class SimTransfer:
    """Pipeline traffic a job's step runs on ``group``: in each of its communicators every pair of consecutive ranks
    (stages) exchanges ``per_step`` messages of ``size_bytes`` each way (activations forward, gradients back), at
    ``busbw_gbs`` (for P2P, NCCL's bus bandwidth is the algorithm bandwidth)."""

    group: str
    per_step: int
    size_bytes: int
    busbw_gbs: float


@dataclass(frozen=True, slots=True)
class SimCollectives:
    """A job's collectives and pipeline transfers per step, and how its groups split into communicators."""

    collectives: tuple[SimCollective, ...]
    transfers: tuple[SimTransfer, ...] = ()
    #: ``(group, communicators)``, each communicator the job's global ranks in communicator-rank order; a group not
    #: named here is one communicator over all the job's ranks
    layout: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...] = ()
    #: a node whose collectives and transfers across nodes take ``slow_factor`` x longer (its network is degraded)
    slow_node: str | None = None
    slow_factor: float = 3.0
    jitter: float = 0.05
    #: ``(group, global rank)``: a rank that reaches that group's collectives late (its peers wait for it)
    late_rank: tuple[str, int] | None = None
    late_factor: float = 3.0  # the peers' kernel time per operation over the late rank's
    #: two global ranks whose point-to-point link runs at ``slow_link_gbs`` (both ends' records show it)
    slow_link: tuple[int, int] | None = None
    slow_link_gbs: float = 40.0


@dataclass(frozen=True, slots=True)
class _Comm:
    """One communicator of a group: NCCL's id for it, its members (global ranks, by communicator rank), its nodes."""

    group: str
    comm_id: str
    members: tuple[int, ...]
    nnodes: int


def _comm_id(job_id: str, group: str) -> str:
    """A communicator id as NCCL prints it (a hex number), the same on every node and run."""
    return f"0x{zlib.crc32(f'{job_id}/{group}'.encode()):08x}{zlib.crc32(group.encode()) & 0xFFFFFF:06x}"


class SimInspector(InspectorSource):
    """An :class:`InspectorSource` over a temporary directory that the job's simulated ranks on ``node`` write into
    before each read: the records of the rounds (parts of steps) run since the previous read."""

    def __init__(
        self,
        *,
        job_id: str,
        node: str,
        nodes: Iterable[str],
        ranks_per_node: int,
        step_seconds: float,
        spec: SimCollectives,
        seed: int = 0,
    ) -> None:
        self._owned = tempfile.mkdtemp(prefix="mfumon-demo-nccl-")
        self.job_id = job_id
        self.node = node
        ordered = sorted(set(nodes))
        self.n_nodes = len(ordered)
        self.ranks_per_node = ranks_per_node
        self.first_rank = ordered.index(node) * ranks_per_node
        self.n_ranks = self.n_nodes * ranks_per_node
        self.step_seconds = step_seconds
        self.spec = spec
        self._random = random.Random(f"{seed}:{job_id}:{node}")
        groups = {c.group for c in spec.collectives} | {t.group for t in spec.transfers}
        self._comms = {group: self._communicators(group) for group in sorted(groups)}
        self._sequence: dict[tuple[str, str], int] = {}  # (comm id, op) -> coll_sn, the same on every rank
        self._p2p_sequence: dict[tuple[str, int], int] = {}  # (comm id, rank) -> p2p_sn, each rank's own
        #: rounds per step: the step's operations split evenly (each count divisible by it)
        self._rounds = math.gcd(*(c.per_step for c in spec.collectives), *(t.per_step for t in spec.transfers)) or 1
        events_per_step = sum(c.per_step * len(self._comms[c.group]) for c in spec.collectives) + sum(
            2 * t.per_step * sum(len(comm.members) - 1 for comm in self._comms[t.group]) for t in spec.transfers
        )
        self._events_per_round = events_per_step // self._rounds
        self._written_until: float | None = None
        self._rounds_owed = 0.0
        pids = {PID_BASE + rank: job_id for rank in range(ranks_per_node)}
        super().__init__(self._owned, job_of_pid=pids.get, local_host=node, first_read="all")

    def collect(self, now: float) -> InspectorBatch:
        self._write(now)
        batch = super().collect(now)
        self._rotate()
        return batch

    def close(self) -> None:
        """Remove the dump directory."""
        shutil.rmtree(self._owned, ignore_errors=True)

    def _communicators(self, group: str) -> tuple[_Comm, ...]:
        """The group's communicators with a rank on this node (the spec's layout, else one over every rank)."""
        layout = dict(self.spec.layout).get(group)
        if layout is None:
            return (_Comm(group, _comm_id(self.job_id, group), tuple(range(self.n_ranks)), self.n_nodes),)
        comms = []
        for index, members in enumerate(layout):
            if any(not 0 <= rank < self.n_ranks for rank in members) or len(set(members)) != len(members):
                raise ValueError(f"{group} communicator {members} is not a set of the job's {self.n_ranks} ranks")
            if not any(self._local(rank) is not None for rank in members):
                continue
            nnodes = len({rank // self.ranks_per_node for rank in members})
            comms.append(_Comm(group, _comm_id(self.job_id, f"{group}/{index}"), tuple(members), nnodes))
        return tuple(comms)

    def _local(self, rank: int) -> int | None:
        """The local index (pid ``PID_BASE + local``) of a global rank on this node; None for another node's."""
        local = rank - self.first_rank
        return local if 0 <= local < self.ranks_per_node else None

    def _write(self, now: float) -> None:
        """The lines of the rounds completed since the previous read, one file per rank."""
        since = self._written_until if self._written_until is not None else now - self.step_seconds
        self._written_until = now
        self._rounds_owed += max(0.0, now - since) / self.step_seconds * self._rounds
        rounds = int(self._rounds_owed)
        self._rounds_owed -= rounds
        if rounds <= 0:
            return
        per_rank: dict[int, list[str]] = {rank: [] for rank in range(self.ranks_per_node)}
        stamp = int(since * 1e6)
        spacing = int(max(now - since, 1e-3) * 1e6) // max(1, rounds * self._events_per_round)
        for _ in range(rounds):
            for coll in self.spec.collectives:
                for _ in range(coll.per_step // self._rounds):
                    for comm in self._comms[coll.group]:
                        stamp += spacing
                        self._collective(comm, coll, stamp, per_rank)
            for transfer in self.spec.transfers:
                for comm in self._comms[transfer.group]:
                    for stage in range(len(comm.members) - 1):
                        for _ in range(transfer.per_step // self._rounds):
                            stamp += spacing
                            self._transfer(comm, transfer, stage, stage + 1, stamp, per_rank)  # activations
                            stamp += spacing
                            self._transfer(comm, transfer, stage + 1, stage, stamp, per_rank)  # their gradients
        for local, lines in per_rank.items():
            path = os.path.join(self.directory, f"{self.node}-pid{PID_BASE + local}.log")
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")

    def _collective(self, comm: _Comm, coll: SimCollective, stamp: int, per_rank: dict[int, list[str]]) -> None:
        """One collective on ``comm``: a record on each of its ranks on this node, with the same size and sequence
        number; a late rank's kernel runs the transfer alone, its peers' wait for it first."""
        key = (comm.comm_id, coll.op)
        sn = self._sequence[key] = self._sequence.get(key, 0) + 1
        us = self._exec_time_us(coll.op, coll.size_bytes, len(comm.members), coll.busbw_gbs, "coll") * self._slow(comm)
        late = self.spec.late_rank
        waits = late is not None and late[0] == comm.group and late[1] in comm.members
        for rank, member in enumerate(comm.members):
            local = self._local(member)
            if local is None:
                continue
            own = us * self.spec.late_factor if waits and late is not None and member != late[1] else us
            per_rank[local].append(self._line(comm, "coll", coll.op, sn, rank, None, coll.size_bytes, own, stamp))

    def _transfer(
        self, comm: _Comm, transfer: SimTransfer, src: int, dst: int, stamp: int, per_rank: dict[int, list[str]]
    ) -> None:
        """One message from communicator rank ``src`` to ``dst``: a Send record at one end, a Recv at the other."""
        ends = {comm.members[src], comm.members[dst]}
        slow_link = self.spec.slow_link is not None and ends == set(self.spec.slow_link)
        gbs = self.spec.slow_link_gbs if slow_link else transfer.busbw_gbs
        us = self._exec_time_us("Send", transfer.size_bytes, len(comm.members), gbs, "p2p") * self._slow(comm)
        for rank, peer, op in ((src, dst, "Send"), (dst, src, "Recv")):
            local = self._local(comm.members[rank])
            if local is None:
                continue
            key = (comm.comm_id, rank)
            sn = self._p2p_sequence[key] = self._p2p_sequence.get(key, 0) + 1
            per_rank[local].append(self._line(comm, "p2p", op, sn, rank, peer, transfer.size_bytes, us, stamp))

    def _slow(self, comm: _Comm) -> float:
        """How many times longer this node's operations on ``comm`` take: ``slow_factor`` on the slow node's
        communicators that cross nodes (its network carries them), else 1."""
        return self.spec.slow_factor if self.node == self.spec.slow_node and comm.nnodes > 1 else 1.0

    def _exec_time_us(self, op: str, size: int, n_ranks: int, gbs: float, kind: Kind) -> int:
        traffic = traffic_bytes(op, size, n_ranks, kind) or 0
        nominal = busbw_gbs(op, size, 1e6, n_ranks, kind) or 0.0  # bus GB moved, over one second
        seconds = nominal / gbs if gbs > 0 else traffic / 1e9
        return max(1, round(seconds * 1e6 * (1.0 + self._random.uniform(-1.0, 1.0) * self.spec.jitter)))

    def _line(
        self, comm: _Comm, kind: Kind, op: str, sn: int, rank: int, peer: int | None, size: int, us: float, stamp: int
    ) -> str:
        """One record as NCCL 2.30's ``inspector_json.cc`` writes it (key order, ``%lf`` doubles)."""
        us = int(us)
        n_ranks = len(comm.members)
        algbw = algbw_gbs(op, size, us, n_ranks, kind) or 0.0
        busbw = busbw_gbs(op, size, us, n_ranks, kind) or 0.0
        pid = PID_BASE + comm.members[rank] - self.first_rank  # the rank's process on this node
        header = (
            f'"id":{json.dumps(comm.comm_id)},"comm_name":{json.dumps(comm.group)},'
            f'"rank":{rank},"n_ranks":{n_ranks},"nnodes":{comm.nnodes}'
        )
        metadata = (
            '"inspector_output_format_version":"v4.0","git_rev":"mfumon-demo",'
            f'"rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":{stamp},'
            f'"hostname":{json.dumps(self.node)},"pid":{pid}'
        )
        if kind == "p2p":
            perf = (
                f'"p2p_perf":{{"p2p":"{op}","p2p_sn":{sn},"p2p_peer":{peer},"p2p_msg_size_bytes":{size},'
                f'"p2p_exec_time_us":{us},"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":{algbw:f},'
                f'"p2p_busbw_gbs":{busbw:f}}}'
            )
        else:
            perf = (
                f'"coll_perf":{{"coll":"{op}","coll_sn":{sn},"coll_msg_size_bytes":{size},'
                f'"coll_exec_time_us":{us},"coll_timing_source":"kernel_gpu","coll_algobw_gbs":{algbw:f},'
                f'"coll_busbw_gbs":{busbw:f}}}'
            )
        return f'{{"header":{{{header}}},"metadata":{{{metadata}}},{perf}}}'

    def _rotate(self) -> None:
        """Files grown past :data:`ROTATE_BYTES` go (everything in them was read: the reads have no byte budget
        short of a demo's output); the next write starts new ones, which the reader reads from their start."""
        for local in range(self.ranks_per_node):
            path = os.path.join(self.directory, f"{self.node}-pid{PID_BASE + local}.log")
            try:
                if os.path.getsize(path) > ROTATE_BYTES:
                    os.unlink(path)
            except OSError:
                continue
