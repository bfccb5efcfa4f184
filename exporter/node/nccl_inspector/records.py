"""Typed records between the Inspector reader's stages: what a parsed line or textfile sample holds.

Everything downstream of parsing reads these fields, never the JSON or label dicts, so a key NCCL renames breaks in
one place (:mod:`.jsonl`, :mod:`.prom`). Field meanings follow NCCL's plugin source (``inspector_json.cc``,
``inspector_prom.cc``, 2.28.3-1 to 2.30.7-1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "COLL_OPS",
    "GPU_TIMED",
    "P2P_OPS",
    "UINT64",
    "CollRecord",
    "Family",
    "Kind",
    "PromFile",
    "PromMode",
    "PromSample",
    "unwrap_size",
]

Family = Literal["2.28", "2.30"]
"""The JSON shape: ``"2.28"`` for 2.28.3-2.29.7 (collectives only, no name), ``"2.30"`` for 2.30.x (``comm_name``,
``p2p_perf``). The file's own ``inspector_output_format_version`` is ``"v4.0"`` in both, so the keys tell."""
Kind = Literal["coll", "p2p"]
PromMode = Literal["2.29", "2.30"]

#: Operations NCCL's Inspector names (its ``ncclFuncToString``); anything else, ``"Invalid"`` above all, is kept but
#: marked (NCCL's AlltoAll, Gather and Scatter come out as ``"Invalid"`` with zero bandwidth).
COLL_OPS = frozenset({"AllGather", "AllReduce", "Broadcast", "Reduce", "ReduceScatter", "AllGatherV", "All2All"})
P2P_OPS = frozenset({"Send", "Recv", "SendRecv"})
#: The timing source of a GPU-timed record (``globaltimer`` on the device); ``kernel_cpu`` and ``collective_cpu``
#: are host clocks around the kernel or the whole call.
GPU_TIMED = "kernel_gpu"
UINT64 = 2**64


def unwrap_size(raw: int) -> tuple[int, bool]:
    """``(bytes, wrapped)``: NCCL 2.28-2.30.7 has no size for ncclUint8 (typeSize -1), so it writes ``2**64 - count``;
    a value above ``2**63`` is that bug, and ``count`` (1-byte elements) is the true size."""
    if raw > 2**63:
        return UINT64 - raw, True
    return raw, False


@dataclass(frozen=True, slots=True)
class CollRecord:
    """One completed collective (``coll_perf``) or point-to-point operation (``p2p_perf``, 2.30) of one rank."""

    family: Family
    kind: Kind
    comm_id: str  # "0x" + 14 hex digits of NCCL's commHash: the same on every rank of the communicator
    comm_name: str | None  # ncclConfig_t.commName (2.30); None when absent or "unknown"
    rank: int
    n_ranks: int
    nnodes: int
    hostname: str
    pid: int
    dump_timestamp_us: int  # when the line was written, not when the operation ran
    op: str
    sn: int  # coll_sn: per communicator and op, every launch; p2p_sn: per communicator, recorded P2P ops only
    peer: int | None  # p2p only
    msg_size_bytes: int  # per rank for AllGather/ReduceScatter; the ncclUint8 bug undone
    raw_msg_size_bytes: int  # as written (what NCCL computed its bandwidths from)
    size_wrapped: bool
    exec_time_us: float
    timing_source: str | None  # None: the line has no timing source (only the README's stale example)
    algbw_gbs: float | None  # as NCCL computed it; None for "nan"
    busbw_gbs: float | None
    verbose: bool  # the line carried event_trace_* (ignored)

    @property
    def known_op(self) -> bool:
        """Whether NCCL's Inspector has a name and a bandwidth definition for the op (``"Invalid"`` has neither)."""
        return self.op in (P2P_OPS if self.kind == "p2p" else COLL_OPS)

    @property
    def gpu_timed(self) -> bool:
        return self.timing_source == GPU_TIMED

    @property
    def comm_key(self) -> str:
        """The name when the framework gave one, else the id: how rows are grouped."""
        return self.comm_name or self.comm_id


@dataclass(frozen=True, slots=True)
class PromSample:
    """One label set of a textfile with its metrics folded together (each label set has 2-3 metric lines)."""

    mode: PromMode
    kind: Kind
    op: str
    node: str  # hostname (2.29 ``hostname``, 2.30 ``node``)
    gpu: str  # "GPU<cudaDev>" (2.29 ``gpu_device_id``, 2.30 ``gpu``)
    slurm_job_id: str | None  # None for "unknown"
    n_ranks: int | None
    n_nodes: int | None
    message_size: str  # NCCL's label: "2.00GB" (2.29) or the bucket "4-5GB" (2.30), 1024-based units
    message_size_bytes: int | None  # the label's value (2.29) or the bucket's lower bound (2.30), in bytes
    busbw_gbs: float | None  # 2.30: geometric mean over the bucket's records
    exec_time_us: float | None  # 2.30: arithmetic mean over the bucket's records
    algbw_gbs: float | None = None  # 2.29 only
    comm_id: str | None = None  # 2.29 only
    comm_name: str | None = None  # 2.30 only; None for "unknown"
    rank: int | None = None  # 2.29 only
    coll_sn: int | None = None  # 2.29 only: the single latest collective of the communicator
    timestamp: str | None = None  # 2.29 only: dump time, "%Y-%m-%dT%H:%M:%SZ"
    algo_proto: str | None = None  # 2.30 collectives: "RING_SIMPLE", ...
    version: str | None = None  # 2.30: "v5.1"

    @property
    def comm_key(self) -> str:
        return self.comm_name or self.comm_id or "unknown"


@dataclass(frozen=True, slots=True)
class PromFile:
    """One GPU's textfile as read: its samples and how old they are (a 2.30 file keeps the last window's values
    while its GPU has no new data, so only the modification time tells)."""

    path: str
    gpu_uuid: str  # NVML form: "GPU-" + the 36 characters of the file name
    mtime: float
    age_seconds: float
    stale: bool
    samples: tuple[PromSample, ...]
