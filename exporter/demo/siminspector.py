"""A training job's NCCL collectives for ``mfumon demo`` (issue 61), written as NCCL Inspector writes them.

Each simulated rank of a job is a process whose Inspector plugin dumps one JSON line per collective into
``<dir>/<host>-pid<pid>.log``, in NCCL 2.30's format (the header with the communicator's name, ``coll_perf`` with
GPU-timed kernel times and the bandwidths NCCL computes). The demo's node reads that directory through the real
reader (:class:`~mfumon.exporter.node.nccl_inspector.InspectorSource`) and folds it into the real running totals
(:class:`~mfumon.exporter.node.nccl_inspector.totals.RunningTotals`) before each push, so the demo's ``collectives``
come from the same parsing, windowing and totals as a real node's.

A collective's time follows from its size and a bus bandwidth (NCCL's definitions,
:mod:`~mfumon.exporter.node.nccl_inspector.bandwidth`): ``time = traffic x bus factor / bus bandwidth``, with a few
percent of jitter; a node named ``slow_node`` runs its collectives ``slow_factor`` times longer.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from mfumon.exporter.node.nccl_inspector import InspectorBatch, InspectorSource
from mfumon.exporter.node.nccl_inspector.bandwidth import algbw_gbs, busbw_gbs, traffic_bytes

__all__ = ["SimCollective", "SimCollectives", "SimInspector"]

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
class SimCollectives:
    """A job's collectives per step; every group spans all the job's ranks (one communicator each)."""

    collectives: tuple[SimCollective, ...]
    slow_node: str | None = None  # a node whose collectives take ``slow_factor`` x longer (its links are degraded)
    slow_factor: float = 3.0
    jitter: float = 0.05


def _comm_id(job_id: str, group: str) -> str:
    """A communicator id as NCCL prints it (a hex number), the same on every node and run."""
    return f"0x{zlib.crc32(f'{job_id}/{group}'.encode()):08x}{zlib.crc32(group.encode()) & 0xFFFFFF:06x}"


class SimInspector(InspectorSource):
    """An :class:`InspectorSource` over a temporary directory that the job's simulated ranks on ``node`` write into
    before each read: the records of the steps run since the previous read."""

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
        self._sequence = {c: 0 for c in {c.group + "/" + c.op for c in spec.collectives}}
        self._comm_ids = {c.group: _comm_id(job_id, c.group) for c in spec.collectives}
        self._written_until: float | None = None
        self._steps_owed = 0.0
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

    def _write(self, now: float) -> None:
        """The lines of the steps completed since the previous read, one file per rank."""
        since = self._written_until if self._written_until is not None else now - self.step_seconds
        self._written_until = now
        self._steps_owed += max(0.0, now - since) / self.step_seconds
        steps = int(self._steps_owed)
        self._steps_owed -= steps
        if steps <= 0:
            return
        slow = self.spec.slow_factor if self.node == self.spec.slow_node else 1.0
        per_rank: dict[int, list[str]] = {rank: [] for rank in range(self.ranks_per_node)}
        stamp = int(since * 1e6)
        spacing = int(max(now - since, 1e-3) * 1e6) // max(1, steps * sum(c.per_step for c in self.spec.collectives))
        for _ in range(steps):
            for coll in self.spec.collectives:
                for _ in range(coll.per_step):
                    key = coll.group + "/" + coll.op
                    self._sequence[key] += 1
                    stamp += spacing
                    us = self._exec_time_us(coll) * slow
                    for local, lines in per_rank.items():
                        rank = self.first_rank + local
                        lines.append(self._line(coll, self._sequence[key], rank, local, us, stamp))
        for local, lines in per_rank.items():
            path = os.path.join(self.directory, f"{self.node}-pid{PID_BASE + local}.log")
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")

    def _exec_time_us(self, coll: SimCollective) -> int:
        traffic = traffic_bytes(coll.op, coll.size_bytes, self.n_ranks) or 0
        nominal = busbw_gbs(coll.op, coll.size_bytes, 1e6, self.n_ranks) or 0.0  # bus GB moved, over one second
        seconds = nominal / coll.busbw_gbs if coll.busbw_gbs > 0 else traffic / 1e9
        return max(1, round(seconds * 1e6 * (1.0 + self._random.uniform(-1.0, 1.0) * self.spec.jitter)))

    def _line(self, coll: SimCollective, sn: int, rank: int, local: int, us: float, stamp: int) -> str:
        """One record as NCCL 2.30's ``inspector_json.cc`` writes it (key order, ``%lf`` doubles)."""
        us = int(us)
        algbw = algbw_gbs(coll.op, coll.size_bytes, us, self.n_ranks) or 0.0
        busbw = busbw_gbs(coll.op, coll.size_bytes, us, self.n_ranks) or 0.0
        header = (
            f'"id":{json.dumps(self._comm_ids[coll.group])},"comm_name":{json.dumps(coll.group)},'
            f'"rank":{rank},"n_ranks":{self.n_ranks},"nnodes":{self.n_nodes}'
        )
        metadata = (
            '"inspector_output_format_version":"v4.0","git_rev":"mfumon-demo",'
            f'"rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":{stamp},'
            f'"hostname":{json.dumps(self.node)},"pid":{PID_BASE + local}'
        )
        perf = (
            f'"coll_perf":{{"coll":"{coll.op}","coll_sn":{sn},"coll_msg_size_bytes":{coll.size_bytes},'
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
