"""Node sample request and node/GPU response bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator

from mfumon.api.schemas._common import (
    CLOCK_SKEW_RULE,
    ID_PATTERN,
    Count,
    Flag,
    Label,
    NonNegativeFloat,
    Number,
    Ratio,
    Timestamp,
    Whole,
)
from mfumon.api.schemas.decoder import FastDecoder
from mfumon.exporter.samples import (
    COLLECTIVE_GROUP,
    COMM_ID,
    COUNTER_FIELDS,
    MAX_COLLECTIVE_RANKS,
    MAX_COLLECTIVES,
    MAX_SOFTWARE,
    MAX_SOFTWARE_VERSION,
    NCCL_OPERATIONS,
    SOFTWARE_COMPONENT,
    SOFTWARE_VERSION,
    THROTTLE_REASONS,
)
from mfumon.mfu import EstimateSource

# The counter and throttle-reason names are defined once, beside the exporter that sends them.
_THROTTLE_REASONS = frozenset(THROTTLE_REASONS)
_COUNTERS = frozenset(COUNTER_FIELDS)

_Temperature = Annotated[Number, Field(ge=-100, le=250)]
_Bounded = Annotated[Number, Field(ge=0, le=1e18)]
_Flag = Annotated[int, Whole(0, 1)]
_ThrottleReason = Annotated[str, Field(json_schema_extra={"enum": list(THROTTLE_REASONS)})]
_Name = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:+\-]+$")]


#: How far a GPU's shares may be from adding up to 1 (an exporter rounds each; a share is at most 1 anyway).
SHARE_TOLERANCE = 1e-3


class GpuJobShare(BaseModel):
    """One job's share of a GPU that several jobs use (time-slicing, MPS); a GPU's shares add up to 1."""

    model_config = ConfigDict(extra="forbid")

    job_id: Annotated[str, StringConstraints(pattern=ID_PATTERN)]
    share: Ratio
    method: Literal["process_utilization", "accounting", "equal_split"] = Field(
        description="per-process utilization samples, accounting statistics, or an equal split when neither answers"
    )


class GpuSample(BaseModel):
    """One GPU (or MIG instance) in a node sample."""

    model_config = ConfigDict(extra="forbid")

    uuid: Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:/+\-]+$")]
    index: Annotated[int, Whole(0, 4096)]
    name: Label
    mig_profile: Annotated[str, StringConstraints(max_length=64, pattern=r"^[A-Za-z0-9.+\-]+$")] | None = None
    job_id: Annotated[str, StringConstraints(pattern=ID_PATTERN)] | None = None
    up: Flag = True
    utilization: Ratio | None = None
    sm_active: Ratio | None = None
    sm_occupancy: Ratio | None = None
    tensor_active: Ratio | None = None
    dram_active: Ratio | None = None
    tensor_active_exact: _Flag | None = Field(
        default=None,
        description="1 when tensor_active is the difference of cumulative tensor and elapsed cycle counters over the "
        "interval (DCGM 4.6+), 0 or absent when it is a sampled ratio",
    )
    hmma_active: Ratio | None = None
    imma_active: Ratio | None = None
    dmma_active: Ratio | None = None
    memory_used_bytes: _Bounded | None = None
    memory_total_bytes: _Bounded | None = None
    power_watts: Annotated[Number, Field(ge=0, le=100_000)] | None = None
    temperature_celsius: _Temperature | None = None
    sm_clock_hz: _Bounded | None = None
    max_sm_clock_hz: _Bounded | None = None
    nvlink_tx_bytes_per_second: NonNegativeFloat | None = None
    nvlink_rx_bytes_per_second: NonNegativeFloat | None = None
    pcie_tx_bytes_per_second: NonNegativeFloat | None = None
    pcie_rx_bytes_per_second: NonNegativeFloat | None = None
    xid_errors_total: Count | None = None
    ecc_uncorrected_total: Count | None = None
    ecc_corrected_total: Count | None = None
    compute_processes: Annotated[int, Whole(0, 100_000)] | None = None
    nvlink_crc_flit_errors_total: Count | None = None
    nvlink_crc_data_errors_total: Count | None = None
    nvlink_replay_errors_total: Count | None = None
    nvlink_recovery_errors_total: Count | None = None
    pcie_replays_total: Count | None = None
    remapped_rows_correctable_total: Count | None = None
    remapped_rows_uncorrectable_total: Count | None = None
    ecc_deferred_total: Count | None = None
    row_remap_pending: _Flag | None = None
    row_remap_failure: _Flag | None = None
    energy_joules_total: _Bounded | None = None
    board_energy_joules_total: _Bounded | None = Field(
        default=None,
        description="a MIG instance: its physical GPU's energy counter (an instance has none); the aggregator gives "
        "the instance its profile's share of the board's energy",
    )
    board_power_watts: Annotated[Number, Field(ge=0, le=100_000)] | None = Field(
        default=None, description="a MIG instance: its physical GPU's power draw"
    )
    last_xid: Annotated[int, Whole(0, 100_000)] | None = None
    pcie_link_gen: Annotated[int, Whole(0, 64)] | None = None
    pcie_link_gen_max: Annotated[int, Whole(0, 64)] | None = None
    pcie_link_width: Annotated[int, Whole(0, 64)] | None = None
    pcie_link_width_max: Annotated[int, Whole(0, 64)] | None = None
    fabric_health_summary: Annotated[int, Whole(0, 3)] | None = Field(
        default=None,
        description="NVML fabric health summary: 0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity",
    )
    fabric_health_mask: Annotated[int, Whole(0, 2**32 - 1)] | None = None
    fabric_manager_status: Annotated[int, Whole(0, 255)] | None = None
    throttle_reasons: Annotated[list[_ThrottleReason], Field(max_length=16)] | None = None
    shares: (
        Annotated[
            list[GpuJobShare],
            Field(
                min_length=2,
                max_length=64,
                description=(
                    "jobs sharing this GPU and each one's share: each job once, the shares adding up to 1 "
                    f"(within {SHARE_TOLERANCE:g}); `job_id`, when given, is one of them; never on a MIG instance "
                    "(`mig_profile`)"
                ),
            ),
        ]
        | None
    ) = None

    @field_validator("shares")
    @classmethod
    def _shares_add_up(cls, shares: list[GpuJobShare] | None, info: ValidationInfo) -> list[GpuJobShare] | None:
        """Runs only when a GPU carries shares (no cost to the push of an unshared GPU)."""
        if shares is None:
            return None
        if info.data.get("mig_profile") is not None:
            raise ValueError("a MIG instance is not shared: send its job_id, not shares")
        jobs = [share.job_id for share in shares]
        if len(set(jobs)) != len(jobs):
            raise ValueError(f"shares name a job more than once: {sorted(jobs)}")
        total = sum(share.share for share in shares)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(f"shares add up to {total:.6g}, not 1")
        job_id = info.data.get("job_id")
        if job_id is not None and job_id not in jobs:
            raise ValueError(f"job_id {job_id!r} is not among the shares")
        return shares

    @field_validator("throttle_reasons")
    @classmethod
    def _known_reasons(cls, reasons: list[str] | None) -> list[str] | None:
        unknown = sorted(set(reasons or ()) - _THROTTLE_REASONS)
        if unknown:
            raise ValueError(f"unknown throttle reason(s) {unknown}; known: {', '.join(THROTTLE_REASONS)}")
        return reasons

    def counters(self) -> dict[str, Any]:
        """The counters present in this sample (absent ones stay absent)."""
        # In the model's field order, so every process lists them alike; unset fields are None. Read by name from a
        # tuple made once (this runs for every GPU of every push), by attribute: the fast decoder's structs
        # (mfumon.api.schemas.decoder) carry this method too.
        out = {name: value for name in _COUNTER_ORDER if (value := getattr(self, name)) is not None}
        if self.throttle_reasons is not None:
            out["throttle_reasons"] = sorted(set(self.throttle_reasons))
        return out


_COUNTER_ORDER = tuple(name for name in GpuSample.model_fields if name in _COUNTERS)


class IbPortSample(BaseModel):
    """One InfiniBand/RoCE port of a node (``/sys/class/infiniband/<device>/ports/<port>``), bytes not words."""

    model_config = ConfigDict(extra="forbid")

    device: _Name
    port: Annotated[int, Whole(0, 255)]
    link_layer: _Name | None = None
    state: _Name | None = None
    phys_state: _Name | None = None
    rate_bytes_per_second: _Bounded | None = None
    link_downed_total: Count | None = None
    symbol_errors_total: Count | None = None
    receive_errors_total: Count | None = None
    link_error_recovery_total: Count | None = None
    transmit_discards_total: Count | None = None
    transmit_bytes_total: Count | None = None
    receive_bytes_total: Count | None = None

    @property
    def key(self) -> str:
        return f"{self.device}:{self.port}"


class NodeSoftware(BaseModel):
    """One component of the node's software its agent read (issue 59): the GPU ``driver``, the CUDA version the driver
    supports (``cuda_driver``), a ``vbios`` (one entry per distinct version on the node)."""

    model_config = ConfigDict(extra="forbid")

    component: Annotated[str, StringConstraints(min_length=1, max_length=32, pattern=SOFTWARE_COMPONENT)]
    version: Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_SOFTWARE_VERSION, pattern=SOFTWARE_VERSION),
        Field(description=f"printable ASCII, no blank at either end, at most {MAX_SOFTWARE_VERSION} characters"),
    ]


class CollectiveSample(BaseModel):
    """One job's collectives of one kind on one communicator on the node, from NCCL Inspector (issue 61): counters
    since the node's agent started, summed over the node's ranks of the communicator."""

    model_config = ConfigDict(extra="forbid")

    job_id: Annotated[str, StringConstraints(pattern=ID_PATTERN)]
    group: Annotated[
        str,
        StringConstraints(pattern=COLLECTIVE_GROUP),
        Field(description="the communicator's name where the framework set one (tp, dp, ...), else its NCCL id"),
    ]
    collective: Literal[NCCL_OPERATIONS]  # type: ignore[valid-type]
    ranks: Annotated[
        int,
        Whole(1, 1_000_000),
        Field(description="the node's ranks in the group (its processes in any of its communicators)"),
    ]
    n_ranks: Annotated[
        int,
        Whole(1, 10_000_000),
        Field(
            description="the ranks the group's communicators on the node hold in all (above `ranks`: they cross nodes)"
        ),
    ]
    operations_total: Count
    seconds_total: Annotated[Number, Field(ge=0, le=1e12, description="GPU-timed kernel seconds, over its ranks")]
    traffic_bytes_total: Annotated[Number, Field(ge=0, le=1e24)]
    bus_bytes_total: Annotated[Number, Field(ge=0, le=1e24, description="traffic x NCCL's bus factor")]
    lost_total: Count
    window_seconds: Annotated[Number, Field(ge=0, le=1e9)] = 0.0
    window_bus_bytes: Annotated[Number, Field(ge=0, le=1e21)] = 0.0
    interval_seconds: Annotated[
        Number, Field(ge=0, le=86_400, description="wall-clock seconds of the interval the window_* figures cover")
    ] = 0.0

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.job_id, self.group, self.collective)


class CollectiveRankSample(BaseModel):
    """One rank's operations of one kind on one communicator over the node agent's last interval, from NCCL Inspector
    (issue 61): lined up across the job's nodes by ``comm_id``, they tell a slow rank from a slow link."""

    model_config = ConfigDict(extra="forbid")

    job_id: Annotated[str, StringConstraints(pattern=ID_PATTERN)]
    group: Annotated[str, StringConstraints(pattern=COLLECTIVE_GROUP)]
    comm_id: Annotated[
        str, StringConstraints(pattern=COMM_ID), Field(description="NCCL's communicator id, the same on every rank")
    ]
    collective: Literal[NCCL_OPERATIONS]  # type: ignore[valid-type]
    rank: Annotated[int, Whole(0, 10_000_000)]
    n_ranks: Annotated[int, Whole(1, 10_000_000)]
    peer: Annotated[int, Whole(0, 10_000_000)] | None = Field(
        default=None, description="point-to-point: the peer's rank; null for collectives"
    )
    operations: Annotated[int, Whole(0, 10**12), Field(description="GPU-timed operations in the interval")]
    seconds: Annotated[Number, Field(ge=0, le=1e9, description="their GPU-timed kernel seconds")]
    traffic_bytes: Annotated[Number, Field(ge=0, le=1e21)]
    bus_bytes: Annotated[Number, Field(ge=0, le=1e21, description="traffic x NCCL's bus factor")]
    interval_seconds: Annotated[Number, Field(ge=0, le=86_400, description="wall-clock seconds of the interval")]

    @property
    def key(self) -> tuple[str, str, str, int, int]:
        return (self.job_id, self.comm_id, self.collective, self.rank, -1 if self.peer is None else self.peer)


class NodeSampleCreate(BaseModel):
    """``POST /v1/nodes/{node}/samples``: one collection cycle of one node."""

    model_config = ConfigDict(extra="forbid")

    timestamp: Annotated[Timestamp, Field(description=CLOCK_SKEW_RULE)]
    pool: Label | None = None
    gpus: Annotated[list[GpuSample], Field(max_length=1024, description="one entry per GPU; each `uuid` once")]
    ib_ports: (
        Annotated[
            list[IbPortSample], Field(max_length=64, description="one entry per port; each (`device`, `port`) once")
        ]
        | None
    ) = None
    software: (
        Annotated[
            list[NodeSoftware],
            Field(
                max_length=MAX_SOFTWARE,
                description="the driver and firmware the node's agent read; each (`component`, `version`) once. The "
                "aggregator keeps the last list it got (a push without one keeps it) and adds `driver`, `cuda_driver` "
                "and `vbios` to the software of the jobs on the node's GPUs",
            ),
        ]
        | None
    ) = None

    collectives: (
        Annotated[
            list[CollectiveSample],
            Field(
                max_length=MAX_COLLECTIVES,
                description="NCCL Inspector's figures per job, communicator and collective kind (issue 61); each "
                "(`job_id`, `group`, `collective`) once",
            ),
        ]
        | None
    ) = None

    collective_ranks: (
        Annotated[
            list[CollectiveRankSample],
            Field(
                max_length=MAX_COLLECTIVE_RANKS,
                description="NCCL Inspector's figures per job, communicator, collective kind, rank and peer over the "
                "agent's last interval (issue 61); each (`job_id`, `comm_id`, `collective`, `rank`, `peer`) once",
            ),
        ]
        | None
    ) = None

    @field_validator("collectives")
    @classmethod
    def _unique_collectives(cls, rows: list[CollectiveSample] | None) -> list[CollectiveSample] | None:
        keys = [row.key for row in rows or ()]
        if len(set(keys)) != len(keys):
            duplicates = sorted({k for k in keys if keys.count(k) > 1})
            raise ValueError(f"duplicate (job_id, group, collective) {duplicates[:3]}")
        return rows

    @field_validator("collective_ranks")
    @classmethod
    def _unique_collective_ranks(cls, rows: list[CollectiveRankSample] | None) -> list[CollectiveRankSample] | None:
        keys = [row.key for row in rows or ()]
        if len(set(keys)) != len(keys):
            duplicates = sorted({k for k in keys if keys.count(k) > 1})
            raise ValueError(f"duplicate (job_id, comm_id, collective, rank, peer) {duplicates[:3]}")
        return rows

    @field_validator("ib_ports")
    @classmethod
    def _unique_ports(cls, ports: list[IbPortSample] | None) -> list[IbPortSample] | None:
        keys = [p.key for p in ports or ()]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"duplicate InfiniBand port(s) {duplicates}")
        return ports

    @field_validator("software")
    @classmethod
    def _unique_software(cls, software: list[NodeSoftware] | None) -> list[NodeSoftware] | None:
        pairs = [(entry.component, entry.version) for entry in software or ()]
        duplicates = sorted({pair for pair in pairs if pairs.count(pair) > 1})
        if duplicates:
            raise ValueError(f"software lists a (component, version) more than once: {duplicates}")
        return software

    @field_validator("gpus")
    @classmethod
    def _unique_uuids(cls, gpus: list[GpuSample]) -> list[GpuSample]:
        seen: set[str] = set()
        for gpu in gpus:
            if gpu.uuid in seen:
                raise ValueError(f"duplicate GPU uuid {gpu.uuid!r}")
            seen.add(gpu.uuid)
        return gpus


PUSH_DECODER = FastDecoder(NodeSampleCreate)
"""A push decoded into structs that read like :class:`NodeSampleCreate` where msgspec can decide, about twice as fast
as the model (:mod:`mfumon.api.schemas.decoder`); None where only the model can."""


def decode_push(body: bytes | str) -> NodeSampleCreate:
    """A push (or a stored one) validated: by :data:`PUSH_DECODER` where it can, else by the model, whose
    ``ValidationError`` is the answer to a bad body."""
    if isinstance(body, str):
        body = body.encode()
    return PUSH_DECODER.decode(body) or NodeSampleCreate.model_validate_json(body)


class SampleAccepted(BaseModel):
    accepted: int
    applied: bool = Field(description="false when the sample was older than the newest one already applied")


class HealthReason(BaseModel):
    """One failing check of a node or of one of its GPUs."""

    check: str
    drain: bool = Field(description="true when this failure puts the node on the drain list")
    meaning: str
    gpu: int | None = None
    uuid: str | None = None
    ports: list[str] | None = None


class NodeHealthPublic(BaseModel):
    """A node's health: ``drain`` nodes should leave the scheduler until reset or repaired."""

    healthy: bool
    drain: bool
    reasons: list[HealthReason]
    checks: dict[str, bool] = Field(description="node-level checks: true passes, false fails")


class GpuPublic(BaseModel):
    uuid: str
    node: str
    index: int
    name: str
    device: str | None
    mig_profile: str | None
    job_id: str | None
    up: bool
    state: str = Field(description="reporting | unreported | idle | down")
    hardware_mfu: float | None = Field(description="tensor-pipe activity x SM clock / max SM clock")
    hardware_estimate_source: EstimateSource | None = Field(
        default=None,
        description="where hardware_mfu's tensor activity came from: cycle_counters (exact differences of DCGM 4.6+ "
        "cumulative cycle counters over the push interval) or ratio_clock (a sampled ratio); null without an estimate",
    )
    counters: dict[str, Any]
    sample_timestamp: float
    health: dict[str, bool] | None = Field(default=None, description="GPU checks: true passes, false fails")


class NodePublic(BaseModel):
    name: str
    pool: str | None
    last_seen_at: float
    last_timestamp: float
    samples_received: int
    gpu_states: dict[str, int] = Field(description="GPUs by state; they add up to the node's GPUs")
    gpus: list[GpuPublic]
    ib_ports: list[dict[str, Any]] | None = None
    health: NodeHealthPublic | None = None
    software: list[dict[str, str]] | None = Field(
        default=None,
        description="the driver and firmware the node's agent reported last ({component, version}: driver, "
        "cuda_driver, vbios); null when it reports none",
    )


class NodesPublic(BaseModel):
    data: list[NodePublic]
    count: int = Field(description="Nodes in this page.")
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; null on the last page.")
