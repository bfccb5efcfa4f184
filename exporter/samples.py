"""What one collection cycle produces: frozen per-GPU samples and the node batch that carries them.

Field names are the wire names of ``POST /v1/nodes/{node}/samples`` (see the shared interface), so a sample turns into
JSON without a mapping table. ``None`` means "this source does not support the counter": it is left out of the JSON,
never sent as zero.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = [
    "COUNTER_FIELDS",
    "HEALTH_COUNTS",
    "LINK_FIELDS",
    "MAX_SOFTWARE",
    "MAX_SOFTWARE_VERSION",
    "SHARE_METHODS",
    "SOFTWARE_COMPONENT",
    "SOFTWARE_VERSION",
    "TENSOR_PRECISION_FIELDS",
    "THROTTLE_REASONS",
    "GpuSample",
    "IbPortSample",
    "JobShare",
    "NodeBatch",
    "SoftwareEntry",
    "count_up",
    "decode_record",
    "sanitize_id",
    "software_entries",
]

#: Fleet health (issue 15): error counts that cost MFU on *some* nodes (integers), 0/1 flags, and energy.
HEALTH_COUNTS: tuple[str, ...] = (
    "nvlink_crc_flit_errors_total",
    "nvlink_crc_data_errors_total",
    "nvlink_replay_errors_total",
    "nvlink_recovery_errors_total",
    "pcie_replays_total",
    "remapped_rows_correctable_total",
    "remapped_rows_uncorrectable_total",
    "ecc_deferred_total",
    "last_xid",
)
_FLAG_FIELDS = ("row_remap_pending", "row_remap_failure", "tensor_active_exact")  # 0 or 1
#: Tensor-pipe activity by precision (0-1): HMMA (fp16/bf16/tf32/fp8 matrix ops), IMMA (integer), DMMA (fp64).
TENSOR_PRECISION_FIELDS: tuple[str, ...] = ("hmma_active", "imma_active", "dmma_active")
#: Link and fabric state (integers): PCIe generation and width now and at most (a link below its maximum has
#: downtrained), the GPU fabric's health summary (NVML: 0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity)
#: and mask, and the fabric manager's status (dcgmFabricManagerStatus_t).
LINK_FIELDS: tuple[str, ...] = (
    "pcie_link_gen",
    "pcie_link_gen_max",
    "pcie_link_width",
    "pcie_link_width_max",
    "fabric_health_summary",
    "fabric_health_mask",
    "fabric_manager_status",
)

#: Counters a GPU sample may carry (all optional). Ratios are 0-1; other names carry their unit.
COUNTER_FIELDS: tuple[str, ...] = (
    "utilization",
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "dram_active",
    # 1 when tensor_active is the difference of cumulative cycle counters over the interval (DCGM 4.6+
    # MMA_CYCLES_ACTIVE_TOTAL / SM_CYCLES_ELAPSED_TOTAL), absent or 0 when it is a sampled ratio.
    "tensor_active_exact",
    *TENSOR_PRECISION_FIELDS,
    "memory_used_bytes",
    "memory_total_bytes",
    "power_watts",
    "temperature_celsius",
    "sm_clock_hz",
    "max_sm_clock_hz",
    "nvlink_tx_bytes_per_second",
    "nvlink_rx_bytes_per_second",
    "pcie_tx_bytes_per_second",
    "pcie_rx_bytes_per_second",
    "xid_errors_total",
    "ecc_uncorrected_total",
    "ecc_corrected_total",
    "compute_processes",
    *HEALTH_COUNTS,
    "row_remap_pending",
    "row_remap_failure",
    "energy_joules_total",
    # A MIG instance has no power or energy reading of its own: its board's, for the aggregator to apportion.
    "board_energy_joules_total",
    "board_power_watts",
    *LINK_FIELDS,
)

#: Clock-event (throttle) reason names the aggregator accepts, in NVML bit order (0x1 ... 0x100).
THROTTLE_REASONS: tuple[str, ...] = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal",
    "hw_thermal",
    "hw_power_brake",
    "display_clocks",
)

_RATIO_FIELDS = frozenset(
    {"utilization", "sm_active", "sm_occupancy", "tensor_active", "dram_active", *TENSOR_PRECISION_FIELDS}
)
_INT_FIELDS = frozenset(
    {
        "xid_errors_total",
        "ecc_uncorrected_total",
        "ecc_corrected_total",
        "compute_processes",
        *HEALTH_COUNTS,
        *LINK_FIELDS,
    }
)
_ID_BAD_CHARS = re.compile(r"[^A-Za-z0-9._:@+\-]")
_ID_LEADING = re.compile(r"^[^A-Za-z0-9]+")


def sanitize_id(raw: str | None) -> str | None:
    """Make a scheduler job id or node name acceptable to the aggregator (``[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}``).

    Characters outside the set become ``_`` (LSF array ids like ``123[4]`` become ``123_4_``); an empty result is
    ``None``.
    """
    if raw is None:
        return None
    text = _ID_LEADING.sub("", _ID_BAD_CHARS.sub("_", raw.strip()))[:128]
    return text or None


#: How a shared GPU's split between jobs was measured, best first (``mfumon.exporter.node.sharing``).
SHARE_METHODS: tuple[str, ...] = ("process_utilization", "accounting", "equal_split")


@dataclass(frozen=True, slots=True)
class JobShare:
    """One job's share (0-1) of a GPU that several jobs' processes use; a GPU's shares add up to 1."""

    job_id: str
    share: float
    method: str  # one of SHARE_METHODS

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "share": self.share, "method": self.method}


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU (or MIG instance) in one collection cycle. ``up=False`` carries identity only."""

    uuid: str
    index: int
    name: str
    mig_profile: str | None = None
    job_id: str | None = None
    up: bool = True
    utilization: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    tensor_active_exact: int | None = None
    hmma_active: float | None = None
    imma_active: float | None = None
    dmma_active: float | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_watts: float | None = None
    temperature_celsius: float | None = None
    sm_clock_hz: float | None = None
    max_sm_clock_hz: float | None = None
    nvlink_tx_bytes_per_second: float | None = None
    nvlink_rx_bytes_per_second: float | None = None
    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    xid_errors_total: int | None = None
    ecc_uncorrected_total: int | None = None
    ecc_corrected_total: int | None = None
    compute_processes: int | None = None
    nvlink_crc_flit_errors_total: int | None = None
    nvlink_crc_data_errors_total: int | None = None
    nvlink_replay_errors_total: int | None = None
    nvlink_recovery_errors_total: int | None = None
    pcie_replays_total: int | None = None
    remapped_rows_correctable_total: int | None = None
    remapped_rows_uncorrectable_total: int | None = None
    ecc_deferred_total: int | None = None
    row_remap_pending: int | None = None
    row_remap_failure: int | None = None
    energy_joules_total: float | None = None
    board_energy_joules_total: float | None = None
    board_power_watts: float | None = None
    last_xid: int | None = None
    pcie_link_gen: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None
    fabric_health_summary: int | None = None
    fabric_health_mask: int | None = None
    fabric_manager_status: int | None = None
    throttle_reasons: tuple[str, ...] | None = None
    shares: tuple[JobShare, ...] | None = None  # only on a GPU shared by two or more jobs; ``job_id`` is the largest

    @classmethod
    def build(cls, uuid: str, index: int, name: str, counters: Mapping[str, Any], **identity: Any) -> GpuSample:
        """A sample from a counter dict: ratios clamped to 0-1, counts made ints, unknown keys rejected."""
        clean: dict[str, Any] = {}
        for key, value in counters.items():
            if value is None:
                continue
            if key == "throttle_reasons":
                clean[key] = tuple(sorted(set(value)))
            elif key in _RATIO_FIELDS:
                clean[key] = min(1.0, max(0.0, float(value)))
            elif key in _FLAG_FIELDS:
                clean[key] = 1 if value else 0
            elif key in _INT_FIELDS:
                clean[key] = max(0, int(value))
            elif key in COUNTER_FIELDS:
                clean[key] = max(0.0, float(value)) if key != "temperature_celsius" else float(value)
            else:
                raise ValueError(f"unknown GPU counter {key!r}")
        return cls(uuid=uuid, index=index, name=name, **identity, **clean)

    def counters(self) -> dict[str, Any]:
        """The counters present in this sample (absent ones stay absent)."""
        out: dict[str, Any] = {}
        for name in COUNTER_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.throttle_reasons is not None:
            out["throttle_reasons"] = list(self.throttle_reasons)
        return out

    def lost(self) -> GpuSample:
        """The same device reported as lost: identity kept, every counter dropped."""
        empty: dict[str, Any] = {f.name: None for f in fields(self) if f.name in (*COUNTER_FIELDS, "throttle_reasons")}
        return replace(self, up=False, shares=None, **empty)

    def to_json(self) -> dict[str, Any]:
        """The JSON object for this GPU in a node-sample body."""
        out: dict[str, Any] = {"uuid": self.uuid, "index": self.index, "name": self.name, "up": self.up}
        if self.mig_profile is not None:
            out["mig_profile"] = self.mig_profile
        if self.job_id is not None:
            out["job_id"] = self.job_id
        if self.up:
            out.update(self.counters())
            if self.shares:
                out["shares"] = [share.to_json() for share in self.shares]
        return out


@dataclass(frozen=True, slots=True)
class IbPortSample:
    """One InfiniBand or RoCE port (``/sys/class/infiniband/<device>/ports/<port>``) in one collection cycle.

    Units are converted at the source: data counters in bytes (the kernel counts 4-byte words), the rate in bytes/s.
    ``None`` means the file is absent or unreadable on this host: left out, never sent as zero.
    """

    device: str
    port: int
    link_layer: str | None = None  # "InfiniBand", or "Ethernet" for RoCE
    state: str | None = None  # ACTIVE, DOWN, INIT, ARMED, ACTIVE_DEFER
    phys_state: str | None = None  # LinkUp, Polling, Disabled, ...
    rate_bytes_per_second: float | None = None
    link_downed_total: int | None = None
    symbol_errors_total: int | None = None
    receive_errors_total: int | None = None
    link_error_recovery_total: int | None = None
    transmit_discards_total: int | None = None
    transmit_bytes_total: int | None = None
    receive_bytes_total: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object for this port in a node-sample body (absent values left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


#: The node's software its agent reports beside the samples (issue 59): the GPU driver, the CUDA version that driver
#: supports, each distinct VBIOS. Bounded as the aggregator bounds it (``software`` of
#: ``POST /v1/nodes/{node}/samples``): at most `MAX_SOFTWARE` entries, each (component, version) once; a component of
#: lower-case letters, digits, ``.``, ``_``, ``-``; a version of printable ASCII, no blank at either end, at most
#: `MAX_SOFTWARE_VERSION` characters.
SOFTWARE_COMPONENT = r"^[a-z0-9][a-z0-9._-]{0,31}$"
SOFTWARE_VERSION = r"^[!-~](?:[ -~]*[!-~])?$"
MAX_SOFTWARE = 16
MAX_SOFTWARE_VERSION = 64
_SOFTWARE_COMPONENT = re.compile(SOFTWARE_COMPONENT)
_NOT_PRINTABLE = re.compile(r"[^ -~]")


@dataclass(frozen=True, slots=True)
class SoftwareEntry:
    """One component of a node's software and its version, e.g. ``("driver", "550.54.15")``, ``("vbios", ...)``."""

    component: str
    version: str

    def to_json(self) -> dict[str, str]:
        return {"component": self.component, "version": self.version}


def software_entries(pairs: Iterable[tuple[str, Any]]) -> tuple[SoftwareEntry, ...]:
    """``(component, version)`` pairs as the aggregator takes them: a version made text (bytes decoded), its
    characters outside printable ASCII dropped, stripped and cut to `MAX_SOFTWARE_VERSION`; an empty version or a
    component outside the rule left out; each pair once, in order, at most `MAX_SOFTWARE`."""
    out: dict[tuple[str, str], SoftwareEntry] = {}
    for component, raw in pairs:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        version = _NOT_PRINTABLE.sub("", text).strip()[:MAX_SOFTWARE_VERSION].rstrip()
        if version and _SOFTWARE_COMPONENT.match(component) and len(out) < MAX_SOFTWARE:
            out.setdefault((component, version), SoftwareEntry(component, version))
    return tuple(out.values())


#: NCCL's collective and point-to-point kinds as NCCL Inspector names them (``ncclFuncToString``, 2.28-2.30).
NCCL_OPERATIONS: tuple[str, ...] = (
    "AllReduce",
    "AllGather",
    "AllGatherV",
    "ReduceScatter",
    "Broadcast",
    "Reduce",
    "AlltoAll",
    "Send",
    "Recv",
    "SendRecv",
)
#: A process group as the node names it: the communicator's name where the framework set one, else its NCCL id.
COLLECTIVE_GROUP = r"^[A-Za-z0-9][A-Za-z0-9 ._:/+=-]{0,127}$"
MAX_COLLECTIVES = 1024
#: NCCL's communicator id as Inspector writes it: ``0x`` and the first 14 hex digits of its 64-bit hash.
COMM_ID = r"^0x[0-9a-f]{1,16}$"
MAX_COLLECTIVE_RANKS = 512


@dataclass(frozen=True, slots=True)
class CollectiveTotals:
    """One job's collectives of one kind on one communicator, on this node, from NCCL Inspector (issue 61).

    Cumulative since the agent started (counters; an agent restart starts them again), over the node's ranks of the
    communicator: operations, their GPU-timed kernel seconds (summed over ranks), the bytes moved as NCCL counts
    them (traffic, and traffic x the bus factor), records NCCL's rings overwrote before they were read (``lost``: not
    guessed into the totals). ``window_*``: the last read interval's, for the bus bandwidth now.
    """

    job_id: str
    group: str
    collective: str
    ranks: int  # this node's ranks in the group seen (its processes in any of the group's communicators)
    n_ranks: int  # the ranks those communicators hold in all (their sizes added): above ``ranks`` when they cross nodes
    operations_total: int
    seconds_total: float
    traffic_bytes_total: float
    bus_bytes_total: float
    lost_total: int
    window_seconds: float = 0.0  # GPU-timed seconds in the last interval, over the node's ranks
    window_bus_bytes: float = 0.0
    interval_seconds: float = 0.0  # the wall-clock length of that interval

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class RankCollective:
    """One rank's operations of one kind on one communicator over the node's last read interval, from NCCL Inspector
    (issue 61): what tells a slow rank from a slow link across a job.

    Per communicator (its NCCL id, the same on every rank of it on every node), so the aggregator can line up the
    ranks of one communicator from all the job's nodes; for point-to-point operations per ``peer`` too, which names
    the other end of the link. GPU-timed records only (the device's own clock over the kernel).
    """

    job_id: str
    group: str  # as in CollectiveTotals: the parallelism, else the framework's name, else the NCCL id
    comm_id: str  # NCCL's id: the same on every rank of the communicator
    collective: str
    rank: int  # the rank in the communicator
    n_ranks: int
    peer: int | None  # point-to-point: the peer's rank in the communicator; None for collectives
    operations: int  # GPU-timed records in the interval
    seconds: float  # their kernel seconds
    traffic_bytes: float  # NCCL's algorithm bytes (per-rank size x ranks for AllGather/ReduceScatter)
    bus_bytes: float  # traffic x NCCL's bus factor
    interval_seconds: float  # the wall-clock length of the interval

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class NodeBatch:
    """One collection cycle of one node: what one ``POST /v1/nodes/{node}/samples`` carries."""

    node: str
    timestamp: float
    gpus: tuple[GpuSample, ...]
    pool: str | None = None
    ib_ports: tuple[IbPortSample, ...] | None = None  # None: the node has no RDMA devices (or none are read)
    # The driver and firmware the source reads (issue 59), sent with every batch: the aggregator keeps the last one
    # and stores it only when it changed. None or empty: the source reads none (left out of the body).
    software: tuple[SoftwareEntry, ...] | None = None
    # NCCL Inspector's figures per job, communicator and collective (issue 61); None: not read on this node.
    collectives: tuple[CollectiveTotals, ...] | None = None
    # ... and per rank and communicator over the last interval, to tell a slow rank from a slow link (issue 61).
    collective_ranks: tuple[RankCollective, ...] | None = None

    def body(self) -> dict[str, Any]:
        """The request body (interface: ``timestamp``, optional ``pool``, ``gpus``; optional ``ib_ports`` and
        ``software``)."""
        out: dict[str, Any] = {"timestamp": self.timestamp, "gpus": [g.to_json() for g in self.gpus]}
        if self.pool is not None:
            out["pool"] = self.pool
        if self.ib_ports is not None:
            out["ib_ports"] = [p.to_json() for p in self.ib_ports]
        if self.software:
            out["software"] = [entry.to_json() for entry in self.software]
        if self.collectives:
            out["collectives"] = [c.to_json() for c in self.collectives[:MAX_COLLECTIVES]]
        if self.collective_ranks:
            out["collective_ranks"] = [r.to_json() for r in self.collective_ranks[:MAX_COLLECTIVE_RANKS]]
        return out

    def encode(self) -> bytes:
        """Self-contained bytes for the spool: the node name travels with the body it belongs to."""
        return json.dumps({"node": self.node, "body": self.body()}, separators=(",", ":")).encode()


def decode_record(data: bytes) -> tuple[str, dict[str, Any]]:
    """Read back what :meth:`NodeBatch.encode` wrote: ``(node, body)``."""
    record = json.loads(data)
    return str(record["node"]), dict(record["body"])


def count_up(gpus: Iterable[GpuSample]) -> tuple[int, int]:
    """How many devices are up and how many are lost."""
    up = lost = 0
    for gpu in gpus:
        if gpu.up:
            up += 1
        else:
            lost += 1
    return up, lost
