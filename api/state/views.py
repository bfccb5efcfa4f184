"""In-memory views of nodes, GPUs and jobs: what ``/metrics`` and the cluster summary read.

Each view is immutable once built; an update replaces the whole view, so a scrape never sees half a write and
renderers can cache by identity of ``revision``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from mfumon.api.schemas.nodes import GpuSample
    from mfumon.api.state.devices import DeviceResolver
    from mfumon.api.state.energy import NodeDraw
    from mfumon.api.state.health import NodeHealth

from mfumon.api.schemas.nodes import IbPortSample
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.profiles import ProfileFigures
from mfumon.mfu import CYCLE_COUNTERS, EstimateSource, estimate_source, hardware_mfu


# GpuView and NodeView are built for every push (one per GPU): they are never changed once built, but not frozen,
# because a frozen dataclass takes twice as long to build. eq=False: compared by identity, hashable.
@dataclass(slots=True, eq=False)
class GpuView:
    uuid: str
    node: str
    index: int
    name: str
    mig_profile: str | None
    job_id: str | None
    up: bool
    counters: dict[str, Any]
    sample_timestamp: float
    device: str | None  # peak-table key, None when the device is unknown
    bf16_peak_flops: float | None  # dense bf16 peak of this device (MIG slice scaled), for idle-capacity sums
    # Derived from the counters once, when the view is built: the view's sums, the health checks, the render and
    # the JSON all read them, for every push.
    busy: bool  # gpu_busy(counters)
    hardware_mfu: float | None  # mfumon.mfu.hardware_mfu of the counters; None without tensor activity
    # Where that estimate came from (mfumon.mfu.estimate_source): None exactly when hardware_mfu is None.
    hardware_estimate_source: EstimateSource | None = None
    shares: tuple[ShareView, ...] | None = None  # jobs sharing the GPU (two or more), as the exporter measured them
    # Its mean power since the GPU's previous view (mfumon.api.state.energy.derive_power, set when the state takes the
    # view) and how it was known: "counter" (energy counter differences) or "power" (a power sample: estimated).
    draw_watts: float | None = None
    draw_method: str | None = None
    mig_fraction: float | None = None  # a MIG instance's share of its GPU (the peak table's), for its board's energy

    @property
    def jobs(self) -> int:
        """Jobs on the GPU (``mfumon_gpu_jobs``): those sharing it, else 1 with a job id, else 0."""
        if self.shares is not None:
            return len(self.shares)
        return 0 if self.job_id is None else 1

    @property
    def idle(self) -> bool:
        """Up, attributed to no job and running no compute work: the ``idle`` state of ``mfumon.api.state.aggregate``,
        which the node view counts, billing charges and the health's idle energy sums."""
        return self.up and self.job_id is None and not self.busy


class ShareView(NamedTuple):
    """One job's share (0-1) of a shared GPU, and how the exporter measured it."""

    job_id: str
    share: float
    method: str


#: How shares are measured, most precise first; a job on several shared GPUs shows the least precise one.
SHARE_METHODS: tuple[str, ...] = ("process_utilization", "accounting", "equal_split")


class CollectiveView(NamedTuple):
    """One job's collectives of one kind on one communicator on a node (NCCL Inspector, issue 61): the agent's
    counters since it started, over the node's ranks, and the last interval's GPU-seconds and bus bytes."""

    job_id: str
    group: str
    collective: str
    ranks: int
    n_ranks: int
    operations_total: int
    seconds_total: float
    traffic_bytes_total: float
    bus_bytes_total: float
    lost_total: int
    window_seconds: float
    window_bus_bytes: float
    interval_seconds: float


def collective_views(rows: Iterable[Any] | None) -> tuple[CollectiveView, ...] | None:
    """A push's ``collectives`` (the model's or the fast decoder's objects) as views; None when it had none."""
    if rows is None:
        return None
    return tuple(CollectiveView(*(getattr(row, name) for name in CollectiveView._fields)) for row in rows)


class CollectiveRankView(NamedTuple):
    """One rank's operations of one kind on one communicator over its node agent's last interval (NCCL Inspector,
    issue 61); ``peer`` for point-to-point operations, else None."""

    job_id: str
    group: str
    comm_id: str
    collective: str
    rank: int
    n_ranks: int
    peer: int | None
    operations: int
    seconds: float
    traffic_bytes: float
    bus_bytes: float
    interval_seconds: float


def collective_rank_views(rows: Iterable[Any] | None) -> tuple[CollectiveRankView, ...] | None:
    """A push's ``collective_ranks`` as views; None when it had none."""
    if rows is None:
        return None
    return tuple(CollectiveRankView(*(getattr(row, name) for name in CollectiveRankView._fields)) for row in rows)


@dataclass(frozen=True, slots=True)
class JobShare:
    """A group of one node's up GPUs (one job's, or the unattributed busy ones) and what the cluster sums need."""

    count: int
    gpu_name: str
    mig_profile: str | None
    bf16_peak_flops: float  # sum over those GPUs; 0 for unknown devices
    estimated: int = 0  # GPUs with a hardware MFU estimate (tensor-activity counters)
    estimate_sum: float = 0.0  # sum of their estimates (for the mean over the job's GPUs)
    estimated_flops: float = 0.0  # sum of estimate x bf16 peak over those of them with a known peak
    estimated_peak_flops: float = 0.0  # sum of the bf16 peak of the same GPUs
    tensor_count: int = 0  # GPUs reporting tensor activity, and its range: for the straggler spread
    tensor_min: float | None = None
    tensor_max: float | None = None
    # GPUs shared with other jobs: they are not in ``count`` (a shared GPU's state is counted once, on the node),
    # and the job has ``gpu_share`` GPU-equivalents in all: ``count`` plus its share of each shared GPU.
    gpu_share: float = 0.0
    shared: int = 0
    share_method: str | None = None  # the least precise method among its shared GPUs
    estimated_exact: int = 0  # of the ``estimated`` GPUs, those whose estimate came from cycle counters

    @property
    def gpus(self) -> int:
        """GPUs the job runs on here, whole or shared."""
        return self.count + self.shared

    def mean_estimate(self) -> float | None:
        return self.estimate_sum / self.estimated if self.estimated else None


@dataclass(slots=True, eq=False)
class NodeView:
    name: str
    pool: str | None
    last_seen_at: float
    last_sample_timestamp: float
    samples_received: int
    updated_at: float
    gpus: tuple[GpuView, ...]
    # Precomputed when the view is built, so cluster sums cost O(nodes), not O(GPUs), per scrape. Every GPU is in
    # exactly one of: a job's share, the unattributed busy share, ``shared`` (jobs time-slicing it: each job's
    # JobShare holds its fraction of it, the GPU's state is counted once), idle, down.
    shares: dict[str, JobShare] = field(default_factory=dict)  # job_id -> the GPUs exporters attribute to it
    unattributed: JobShare | None = None  # up, no job id, but running compute work
    shared: tuple[tuple[str, ...], ...] = ()  # per shared GPU (up), the ids of the jobs on it: one state each
    gpus_idle: int = 0  # up, no job id, no compute work
    idle_bf16_peak_flops: float = 0.0
    gpus_down: int = 0
    gpus_unknown_model: int = 0
    ib_ports: tuple[PortView, ...] | None = None  # InfiniBand/RoCE ports, as the exporter sent them
    health: NodeHealth | None = None  # set by mfumon.api.state.health.advance when the state applies the view
    draw: NodeDraw | None = None  # its power by job and state (mfumon.api.state.energy), set with the GPUs' power
    # The peak-table key of all its GPUs when they are one device (every node we know of): pricing its idle and
    # unreported GPUs is then one lookup per node. None when they differ (or are unknown): priced GPU by GPU.
    device: str | None = None
    # The driver and firmware its agent reported last, (component, version) as sent (issue 59): kept when a push
    # has none; the jobs on its GPUs take them (mfumon.api.state.software).
    software: tuple[tuple[str, str], ...] | None = None
    collectives: tuple[CollectiveView, ...] | None = None  # NCCL Inspector's, as its last push sent them
    collective_ranks: tuple[CollectiveRankView, ...] | None = None  # ... per rank and peer, its last interval

    @property
    def revision(self) -> tuple[float, float]:
        """Orders views of one node by what they say, whichever replica built them: newest sample, then last push."""
        return (self.last_sample_timestamp, self.last_seen_at)


@dataclass(frozen=True, slots=True)
class PortView:
    """One InfiniBand/RoCE port as the node view keeps it: which port, its state, and the counters the exporter sent
    (``rate_bytes_per_second`` and the ``*_total`` counters, present ones only, as a GPU view keeps its counters)."""

    device: str
    port: int
    link_layer: str | None
    state: str | None
    phys_state: str | None
    counters: Mapping[str, float]

    @property
    def key(self) -> str:
        """The health tracker's key of this port."""
        return f"ib:{self.device}:{self.port}"

    def as_json(self) -> dict[str, Any]:
        """The port as ``GET /v1/nodes`` shows it: the fields the exporter sent, in the push's order."""
        head = {"link_layer": self.link_layer, "state": self.state, "phys_state": self.phys_state}
        present = {name: value for name, value in head.items() if value is not None}
        return {"device": self.device, "port": self.port, **present, **self.counters}


_PORT_IDENTITY = frozenset({"device", "port", "link_layer", "state", "phys_state"})
_PORT_COUNTERS = tuple(name for name in IbPortSample.model_fields if name not in _PORT_IDENTITY)


def port_views(ports: Iterable[IbPortSample] | None) -> tuple[PortView, ...] | None:
    """A node's InfiniBand/RoCE ports as the view keeps them (None: the exporter reads none on this node)."""
    if ports is None:
        return None
    return tuple(
        PortView(
            device=p.device,
            port=p.port,
            link_layer=p.link_layer,
            state=p.state,
            phys_state=p.phys_state,
            counters={name: value for name in _PORT_COUNTERS if (value := getattr(p, name)) is not None},
        )
        for p in ports
    )


def gpu_views(
    node: str, sample_timestamp: float, gpus: Iterable[GpuSample], resolver: DeviceResolver
) -> tuple[GpuView, ...]:
    """A node's GPUs as views, in index order: the same code for a push received and a row read back."""
    views = []
    for gpu in sorted(gpus, key=lambda g: (g.index, g.uuid)):
        device, peak = resolver.resolve(gpu.name, gpu.mig_profile)
        counters = gpu.counters() if gpu.up else {}
        shares = None
        job_id = gpu.job_id
        if gpu.shares is not None and gpu.up:
            shares = tuple(ShareView(s.job_id, s.share, s.method) for s in gpu.shares)
            job_id = job_id or max(shares, key=lambda s: s.share).job_id
        estimate = hardware_mfu(
            counters.get("tensor_active"), counters.get("sm_clock_hz"), counters.get("max_sm_clock_hz")
        )
        source = None if estimate is None else estimate_source(counters.get("tensor_active_exact"))
        # By position, in GpuView's field order: half the cost of keywords, for every GPU of every push.
        views.append(
            GpuView(
                gpu.uuid,
                node,
                gpu.index,
                gpu.name,
                gpu.mig_profile,
                job_id,
                gpu.up,
                counters,
                sample_timestamp,
                device,
                peak,
                gpu_busy(counters),
                estimate,
                source,
                shares,
            )
        )
    _with_fractions(views, resolver)
    return tuple(views)


def _with_fractions(views: list[GpuView], resolver: DeviceResolver) -> None:
    for view in views:
        if view.mig_profile is not None:
            view.mig_fraction = resolver.mig_fraction(view.name, view.mig_profile)


def gpu_busy(counters: dict[str, Any]) -> bool:
    """Whether compute work runs on a GPU: its compute processes when the source lists them, else any activity.

    NVML lists compute processes; a source that cannot (dcgm-exporter) leaves ``compute_processes`` out, and then a
    kernel that ran during the sample (utilization, SM or tensor activity above 0) is the evidence.
    """
    processes = counters.get("compute_processes")
    if processes is not None:
        return bool(processes > 0)
    return any((counters.get(name) or 0) > 0 for name in ("utilization", "sm_active", "tensor_active"))


def build_node_view(
    *,
    name: str,
    pool: str | None,
    last_seen_at: float,
    last_sample_timestamp: float,
    samples_received: int,
    updated_at: float,
    gpus: tuple[GpuView, ...],
    ib_ports: tuple[PortView, ...] | None = None,
    software: tuple[tuple[str, str], ...] | None = None,
    collectives: tuple[CollectiveView, ...] | None = None,
    collective_ranks: tuple[CollectiveRankView, ...] | None = None,
) -> NodeView:
    """Build a node view: each GPU goes to its job's share, the unattributed busy share, idle or down; a GPU that
    several jobs share goes to each of them by its share, and its state is counted once (``shared``)."""
    groups: dict[str | None, list[Any]] = {}
    shared: list[tuple[str, ...]] = []
    down = unknown = idle = 0
    idle_peak = 0.0
    for gpu in gpus:
        if not gpu.up:
            down += 1
            continue
        if gpu.bf16_peak_flops is None:
            unknown += 1
        if gpu.idle:
            idle += 1
            idle_peak += gpu.bf16_peak_flops or 0.0
            continue
        if gpu.shares is not None:
            shared.append(tuple(share.job_id for share in gpu.shares))
            for share in gpu.shares:
                _add_shared(groups.setdefault(share.job_id, _entry(gpu)), gpu, share)
            continue
        entry = groups.setdefault(
            gpu.job_id, [0, gpu.name, gpu.mig_profile, 0.0, 0, 0.0, 0.0, 0.0, 0, None, None, 0.0, 0, None, 0]
        )
        entry[0] += 1
        entry[11] += 1.0
        entry[3] += gpu.bf16_peak_flops or 0.0
        estimate = gpu.hardware_mfu
        if estimate is not None:
            entry[4] += 1
            entry[5] += estimate
            if gpu.hardware_estimate_source == CYCLE_COUNTERS:
                entry[14] += 1
            if gpu.bf16_peak_flops:
                entry[6] += estimate * gpu.bf16_peak_flops
                entry[7] += gpu.bf16_peak_flops
        tensor = gpu.counters.get("tensor_active")
        if tensor is not None:
            entry[8] += 1
            entry[9] = tensor if entry[9] is None else min(entry[9], tensor)
            entry[10] = tensor if entry[10] is None else max(entry[10], tensor)
    shares = {job: JobShare(*values) for job, values in groups.items() if job is not None}
    unattributed = JobShare(*groups[None]) if None in groups else None
    return NodeView(
        name=name,
        pool=pool,
        last_seen_at=last_seen_at,
        last_sample_timestamp=last_sample_timestamp,
        samples_received=samples_received,
        updated_at=updated_at,
        gpus=gpus,
        shares=shares,
        unattributed=unattributed,
        shared=tuple(shared),
        gpus_idle=idle,
        idle_bf16_peak_flops=idle_peak,
        gpus_down=down,
        gpus_unknown_model=unknown,
        device=_one_device(gpus),
        ib_ports=ib_ports,
        software=software,
        collectives=collectives,
        collective_ranks=collective_ranks,
    )


def _one_device(gpus: tuple[GpuView, ...]) -> str | None:
    devices = {gpu.device for gpu in gpus}
    return devices.pop() if len(devices) == 1 else None


def _entry(gpu: GpuView) -> list[Any]:
    """A JobShare's fields, in order, before any GPU is added."""
    return [0, gpu.name, gpu.mig_profile, 0.0, 0, 0.0, 0.0, 0.0, 0, None, None, 0.0, 0, None, 0]


def _add_shared(entry: list[Any], gpu: GpuView, share: ShareView) -> None:
    """One job's part of a shared GPU: its share of the peak and of the hardware estimate (so the job's estimate
    leaves out the others' work); the GPU's tensor activity is the sum of all jobs', so no straggler range."""
    fraction = share.share
    peak = gpu.bf16_peak_flops or 0.0
    entry[3] += peak * fraction
    estimate = gpu.hardware_mfu
    if estimate is not None:
        entry[4] += 1
        entry[5] += estimate * fraction
        if gpu.hardware_estimate_source == CYCLE_COUNTERS:
            entry[14] += 1
        if peak:
            entry[6] += estimate * peak * fraction
            entry[7] += peak * fraction
    entry[11] += fraction
    entry[12] += 1
    held = entry[13]
    if held is None or SHARE_METHODS.index(share.method) > SHARE_METHODS.index(held):
        entry[13] = share.method


@dataclass(frozen=True, slots=True)
class JobView:
    job_id: str
    status: str  # pending | running | ended
    kind: str
    name: str | None
    team: str | None
    pool: str | None
    gpu_model: str | None
    dtype: str
    num_gpus: int | None
    gpus_requested: int | None
    model_key: str | None
    created_at: float
    started_at: float | None
    last_report_at: float | None
    ended_at: float | None
    latest: ReportOutcome | None  # what its newest report produced
    updated_at: float
    restarts: int = 0
    failures: int = 0
    accounting: dict[str, Any] | None = None  # the ledger (mfumon.api.accounting) and lifecycle marks
    # From a scheduler adapter; defaults for jobs no scheduler reports.
    source: str | None = None
    submitted_at: float | None = None
    queued_at: float | None = None
    pending_reason: str | None = None
    scheduler_restarts: int | None = None  # the scheduler's requeue count
    gpus_scheduled: int | None = None
    placement: dict[str, int] | None = None
    request_units: tuple[tuple[int, int], ...] | None = None
    profile: ProfileFigures | None = None  # the figures of its latest profile (issue 32)

    @property
    def queued(self) -> bool:
        """Pending and competing for GPUs: a scheduler job held or blocked on a dependency is not."""
        return self.status == "pending" and (self.source is None or self.queued_at is not None)


@dataclass(frozen=True, slots=True)
class SourceView:
    """A scheduler adapter's last sync, the quotas it read and the pools it defines."""

    name: str
    kind: str
    observed_at: float
    synced_at: float
    quotas: tuple[tuple[str, str | None, int], ...]  # (team, pool or None for all pools, GPUs)
    updated_at: float
    pools: tuple[tuple[str, frozenset[str]], ...] | None = None  # (pool, its nodes); None: the adapter defines none


@dataclass(frozen=True, slots=True)
class HistogramView:
    """Cumulative queue waits of started jobs for one (pool, team); counts per bucket of QUEUE_WAIT_BUCKETS."""

    pool: str
    team: str
    buckets: tuple[int, ...]
    sum_seconds: float
    count: int
    updated_at: float


#: Upper bounds (seconds) of the queue-wait histogram: 1 min to 1 week; the last bucket is +Inf.
QUEUE_WAIT_BUCKETS: tuple[float, ...] = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800)


@dataclass(frozen=True, slots=True)
class BaselineView:
    signature: str
    mfu: float
    updated_at: float
    pinned: bool = False
