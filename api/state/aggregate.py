"""Cluster, pool, team and per-job numbers derived from one snapshot, in O(nodes + jobs).

Two sources, each the ground truth for one thing (README, "Where each number comes from"):
- the **exporters** say where GPUs are and how busy their tensor pipes are. Every GPU an exporter reports is in
  exactly one state: ``reporting`` (attributed to a job that posts throughput), ``unreported`` (attributed to a job
  that does not, or running compute work with no job id), ``idle`` or ``down``. A job's allocated GPUs are the ones
  exporters attribute to it; GPUs only a report claims are *unverified* and count nowhere else.
- **job reports** say how many model FLOPs are useful.

A GPU that several jobs share (time-slicing, MPS; the exporter sends each job's share of it) is one GPU in one state,
``reporting`` when any of its jobs reports; each job counts it among its GPUs and gets its share of the GPU's peak and
of its hardware estimate, so the jobs' shares of its capacity add up to the GPU's.

Cluster MFU = Σ useful FLOP/s ÷ (Σ dense peak of the busy GPUs it covers + Σ bf16 peak of idle GPUs), where a
reporting job contributes its reported MFU x the peak of its attributed GPUs (at its dtype), and unreported GPUs
contribute their hardware estimate x their bf16 peak. Busy GPUs with no number (a job whose MFU is unknown, GPUs
without tensor counters) are left out of both sides. Allocated MFU is the same without the idle GPUs; pool MFU covers
the GPUs of the pool's nodes; team MFU the team's jobs' GPUs. Coverage = reporting GPUs ÷ busy GPUs: how much of
the figure rests on reports rather than estimates. Resource satisfaction = Σ allocated ÷ Σ requested over the
pool's running and queued jobs. Pools are those of the nodes exporters report, and every pool a scheduler adapter
lists (:mod:`mfumon.api.state.pools`: the scheduler's pools replace exporters' ``--pool`` for the nodes they list, and
may overlap: a node in two pools counts in both, in the cluster once); a job's ``pool`` label creates none.

A **scheduler adapter** (``mfumon scheduler``), when one runs, is the ground truth for what jobs asked for and were
given: a job it lists as running is allocated the GPUs the scheduler gave it (whether or not it reports), and a job it
lists as held or blocked is pending but not queued, so it counts as neither requested nor waiting. A job that the
scheduler runs but that posts no throughput is not *reporting*: its GPUs are ``unreported``. Queue, quota and
fragmentation numbers: :mod:`mfumon.api.state.capacity`.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from mfumon.api.accounting.stragglers import spread_of_range
from mfumon.api.state.capacity import Capacity, capacity
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import SHARE_METHODS, GpuView, JobShare, JobView, NodeView
from mfumon.mfu import JobEstimateSource, agreement_ratio, job_estimate_source

STATES: tuple[str, ...] = ("reporting", "unreported", "idle", "down")


@dataclass(slots=True)
class GroupTotals:
    """The cluster, a pool or a team. GPU states and FLOP/s come from the GPUs; job counts from the jobs."""

    gpus_reporting: int = 0
    gpus_unreported: int = 0
    gpus_idle: int = 0
    gpus_down: int = 0
    model_flops_per_second: float = 0.0  # reported MFU x peak of reporting GPUs + hardware estimates of the others
    estimated_flops_per_second: float = 0.0  # the hardware-estimate part of it
    peak_flops_per_second: float = 0.0  # dense peak of the busy GPUs with a number
    idle_peak_flops_per_second: float = 0.0
    gpus_allocated: int = 0  # GPUs exporters attribute to the group's running jobs
    gpus_requested: int = 0
    jobs_running: int = 0
    jobs_pending: int = 0

    def states(self) -> dict[str, int]:
        return {
            "reporting": self.gpus_reporting,
            "unreported": self.gpus_unreported,
            "idle": self.gpus_idle,
            "down": self.gpus_down,
        }

    @property
    def gpus_busy(self) -> int:
        return self.gpus_reporting + self.gpus_unreported

    @property
    def mfu(self) -> float | None:
        denominator = self.peak_flops_per_second + self.idle_peak_flops_per_second
        return self.model_flops_per_second / denominator if denominator > 0 else None

    @property
    def allocated_mfu(self) -> float | None:
        if self.peak_flops_per_second <= 0:
            return None
        return self.model_flops_per_second / self.peak_flops_per_second

    @property
    def reported_coverage(self) -> float | None:
        return self.gpus_reporting / self.gpus_busy if self.gpus_busy else None

    @property
    def resource_satisfaction(self) -> float | None:
        return self.gpus_allocated / self.gpus_requested if self.gpus_requested > 0 else None


@dataclass(slots=True)
class JobHardware:
    """What the exporters say about one job id: its GPUs and their tensor activity."""

    gpus_attributed: int = 0
    estimated: int = 0  # of those, GPUs with a hardware estimate
    estimate_sum: float = 0.0
    estimated_exact: int = 0  # of those, GPUs whose estimate came from cycle counters
    pool: str | None = None  # the first, by name, of the pools of the nodes holding its GPUs
    tensor_count: int = 0  # GPUs with tensor activity, and its range (mfumon.api.accounting.stragglers)
    tensor_min: float | None = None
    tensor_max: float | None = None
    gpus_shared: int = 0  # of its GPUs, those it shares with other jobs
    gpu_share: float = 0.0  # GPU-equivalents: its whole GPUs plus its share of each shared one
    share_method: str | None = None

    def add_share(self, share: JobShare) -> None:
        self.gpus_attributed += share.gpus
        self.estimated += share.estimated
        self.estimate_sum += share.estimate_sum
        self.estimated_exact += share.estimated_exact
        self.add_tensor_range(share)
        self.gpus_shared += share.shared
        self.gpu_share += share.gpu_share
        if share.share_method is not None and (
            self.share_method is None
            or SHARE_METHODS.index(share.share_method) > SHARE_METHODS.index(self.share_method)
        ):
            self.share_method = share.share_method

    @property
    def hardware_mfu(self) -> float | None:
        """Mean hardware estimate over the job's GPUs that have one; None when none has."""
        return self.estimate_sum / self.estimated if self.estimated else None

    @property
    def hardware_estimate_source(self) -> JobEstimateSource | None:
        """Where that mean came from: ``cycle_counters`` or ``ratio_clock`` for all its GPUs, else ``mixed``."""
        return job_estimate_source(self.estimated, self.estimated_exact)

    def add_tensor_range(self, share: JobShare) -> None:
        if share.tensor_min is None or share.tensor_max is None:
            return
        self.tensor_count += share.tensor_count
        self.tensor_min = share.tensor_min if self.tensor_min is None else min(self.tensor_min, share.tensor_min)
        self.tensor_max = share.tensor_max if self.tensor_max is None else max(self.tensor_max, share.tensor_max)

    @property
    def tensor_spread(self) -> float | None:
        return spread_of_range(self.tensor_min, self.tensor_max, self.tensor_count)


@dataclass(frozen=True, slots=True)
class JobAccount:
    """A job's GPUs by source: what exporters confirm, what the report claims, and the difference."""

    status: str  # pending | running, or "unregistered": exporters attribute GPUs to an id with no live job
    reporting: bool
    gpus_attributed: int
    gpus_reported: int | None
    hardware_mfu: float | None
    mfu: float | None = None  # the reported MFU, for reporting jobs
    dtype: str | None = None
    pool: str | None = None  # the pool of the nodes holding its GPUs (the first by name)
    tensor_active_spread: float | None = None  # (max - min) / max tensor activity over its GPUs
    gpus_scheduled: int | None = None  # what the scheduler allocated, for jobs a scheduler adapter runs
    gpus_shared: int = 0  # of the attributed GPUs, those other jobs use too
    gpu_share: float | None = None  # GPU-equivalents (whole GPUs + shares of shared ones); None without GPUs
    share_method: str | None = None  # how the shares were measured (the least precise), None when nothing is shared
    hardware_estimate_source: JobEstimateSource | None = None  # cycle_counters | ratio_clock | mixed, with the estimate

    @property
    def gpus_held(self) -> int:
        """GPUs the job holds: the scheduler's allocation when a scheduler runs it, else what exporters attribute."""
        return self.gpus_scheduled if self.gpus_scheduled is not None else self.gpus_attributed

    @property
    def agreement(self) -> float | None:
        """Reported MFU ÷ hardware-estimated MFU (``mfumon.mfu.agreement_ratio``); fp32 runs outside the tensor
        pipes."""
        if not self.reporting or self.dtype == "fp32":
            return None
        return agreement_ratio(self.mfu, self.hardware_mfu)

    @property
    def gpus_unverified(self) -> int:
        """GPUs the report claims beyond those exporters attribute (only running jobs claim any)."""
        if self.status != "running" or not self.gpus_reported:
            return 0
        return max(0, self.gpus_reported - self.gpus_attributed)

    @property
    def gpus_unreported(self) -> int:
        return 0 if self.reporting else self.gpus_attributed

    @property
    def gpu_count_mismatch(self) -> bool:
        """Exporters see the job, but on another number of GPUs than it reports."""
        return (
            self.reporting
            and self.gpus_attributed > 0
            and bool(self.gpus_reported)
            and (self.gpus_reported != self.gpus_attributed)
        )


@dataclass(slots=True)
class Summary:
    cluster: GroupTotals
    pools: dict[str, GroupTotals]
    teams: dict[str, GroupTotals]
    jobs: dict[str, JobAccount]  # every visible job and every job id exporters attribute GPUs to
    gpus_known: int = 0
    gpus_unknown_model: int = 0
    gpus_unverified: int = 0
    jobs_gpu_mismatch: int = 0
    nodes: int = 0
    allocated: dict[str, int] = field(default_factory=dict)  # job_id -> GPUs exporters attribute (or scheduler gave)
    capacity: Capacity | None = None


def node_gpu_states(node: NodeView, reporting: Container[str]) -> dict[str, int]:
    """One node's GPUs by state, given the ids of the jobs that report; the four add up to ``len(node.gpus)``."""
    reported = unreported = 0  # one loop, no generators: billing runs this for every node (fleet_billing.state_prices)
    for job_id, share in node.shares.items():
        if job_id in reporting:
            reported += share.count
        else:
            unreported += share.count
    if node.unattributed is not None:
        unreported += node.unattributed.count
    for jobs in node.shared:  # a shared GPU is in one state: reporting when any of its jobs reports
        if any(job in reporting for job in jobs):
            reported += 1
        else:
            unreported += 1
    return {
        "reporting": reported,
        "unreported": unreported,
        "idle": node.gpus_idle,
        "down": node.gpus_down,
    }


@dataclass(frozen=True, slots=True)
class BusyUnreported:
    """GPUs busy while nobody reports their throughput, now: per job (``(job_id, kind)``, the GPUs exporters
    attribute to a job that does not report, as ``mfumon_job_gpus_unreported``) and per node (its busy GPUs with
    no job id). What the periodic billing turns into the unreported seconds counters."""

    jobs: dict[tuple[str, str], int]
    nodes: dict[str, int]


def busy_unreported(snapshot: Snapshot) -> BusyUnreported:
    """The jobs and nodes with GPUs busy without reports in ``snapshot`` (only those holding some)."""
    reporting = reporting_jobs(snapshot)
    kinds = {job.job_id: job.kind for job in snapshot.jobs}
    jobs: dict[tuple[str, str], int] = {}
    nodes: dict[str, int] = {}
    for node in snapshot.nodes:
        if node.unattributed is not None and node.unattributed.count:
            nodes[node.name] = nodes.get(node.name, 0) + node.unattributed.count
        for job_id, share in node.shares.items():
            if job_id not in reporting and share.gpus:
                key = (job_id, kinds.get(job_id, ""))
                jobs[key] = jobs.get(key, 0) + share.gpus
    return BusyUnreported(jobs=jobs, nodes=nodes)


def gpu_state(gpu: GpuView, reporting: Container[str]) -> str:
    """One GPU's state, the definition that :func:`node_gpu_states` and :func:`summarize` sum per node."""
    if not gpu.up:
        return "down"
    if gpu.idle:
        return "idle"
    if gpu.shares is not None:
        return "reporting" if any(share.job_id in reporting for share in gpu.shares) else "unreported"
    return "reporting" if gpu.job_id is not None and gpu.job_id in reporting else "unreported"


def reporting_jobs(snapshot: Snapshot) -> set[str]:
    """Ids of the jobs that post throughput: running ones (a job silent past the job TTL is no longer visible)."""
    return {job.job_id for job in snapshot.jobs if _reporting(job)}


def _reporting(job: JobView) -> bool:
    """Running and posting throughput; a job only a scheduler says is running has not reported."""
    return job.status == "running" and (job.source is None or job.last_report_at is not None)


def _requested(job: JobView, allocated: int) -> int:
    return job.gpus_requested or job.num_gpus or allocated


def _add_share(groups: list[GroupTotals], share: JobShare, job: JobView | None) -> None:
    """Add one node's share of a job (or its unattributed busy GPUs, ``job=None``) to the groups it belongs to."""
    latest = (job.latest if job is not None else None) or ReportOutcome()
    if job is not None:  # reporting: the reported MFU over the attributed GPUs, at the job's dtype
        mfu, per_gpu = latest.mfu, latest.peak_flops_per_gpu
        useful = estimated = peak = 0.0
        if mfu is not None and per_gpu:
            # Its reported MFU is over whole GPUs; its capacity is its share of the shared ones, which its work
            # cannot exceed (equal to share.count when it shares none).
            peak = per_gpu * share.gpu_share
            useful = mfu * per_gpu * share.gpus
            if share.shared:
                useful = min(useful, peak)
    else:  # unreported: what the tensor pipes executed, over the GPUs that can tell
        useful = estimated = share.estimated_flops
        peak = share.estimated_peak_flops
    for group in groups:  # GPU states: whole GPUs only (shared ones are counted once per node, in summarize)
        if job is not None:
            group.gpus_reporting += share.count
        else:
            group.gpus_unreported += share.count
        group.model_flops_per_second += useful
        group.estimated_flops_per_second += estimated
        group.peak_flops_per_second += peak


def _sharing(account: JobHardware) -> dict[str, Any]:
    """A job account's sharing fields from what the exporters say."""
    return {
        "gpus_shared": account.gpus_shared,
        "gpu_share": account.gpu_share if account.gpus_attributed else None,
        "share_method": account.share_method,
    }


def summarize(snapshot: Snapshot) -> Summary:
    """Derive every cluster-level and per-job number from one snapshot in O(nodes + jobs)."""
    jobs = {j.job_id: j for j in snapshot.jobs}
    running = {job_id: j for job_id, j in jobs.items() if _reporting(j)}
    hardware: dict[str, JobHardware] = {}
    cluster = GroupTotals()
    pools: dict[str, GroupTotals] = {}
    teams: dict[str, GroupTotals] = {}
    summary = Summary(cluster=cluster, pools=pools, teams=teams, jobs={})
    for name in snapshot.pools.listed:  # every pool the scheduler lists, nodes reporting or not
        pools[name] = GroupTotals()

    for node in snapshot.nodes:
        summary.nodes += 1
        summary.gpus_known += len(node.gpus)
        summary.gpus_unknown_model += node.gpus_unknown_model
        node_pools = snapshot.pools.of(node)
        groups = [cluster, *(pools.setdefault(name, GroupTotals()) for name in node_pools)]
        for group in groups:
            group.gpus_down += node.gpus_down
            group.gpus_idle += node.gpus_idle
            group.idle_peak_flops_per_second += node.idle_bf16_peak_flops
        if node.unattributed is not None:
            _add_share(groups, node.unattributed, None)
        for sharing in node.shared:
            reported = any(job_id in running for job_id in sharing)
            for group in groups:
                if reported:
                    group.gpus_reporting += 1
                else:
                    group.gpus_unreported += 1
        for job_id, share in node.shares.items():
            account = hardware.setdefault(job_id, JobHardware())
            account.add_share(share)
            first = node_pools[0] if node_pools else None  # a node's pools come sorted by name
            if first is not None and (account.pool is None or first < account.pool):
                account.pool = first  # the same pool whatever order the nodes come in
            job = jobs.get(job_id)
            team = teams.setdefault(job.team, GroupTotals()) if job is not None and job.team else None
            _add_share(groups if team is None else [*groups, team], share, running.get(job_id))

    for job in snapshot.jobs:
        account = hardware.get(job.job_id, JobHardware())
        pool_name = job.pool if job.pool in pools else account.pool
        groups = [cluster]
        if pool_name:
            groups.append(pools[pool_name])
        if job.team:
            groups.append(teams.setdefault(job.team, GroupTotals()))
        allocated = account.gpus_attributed
        if job.status == "running" and job.gpus_scheduled is not None:
            allocated = job.gpus_scheduled  # the scheduler's allocation: what satisfaction compares with requests
        summary.allocated[job.job_id] = allocated
        summary.jobs[job.job_id] = JobAccount(
            status=job.status,
            reporting=_reporting(job),
            gpus_attributed=account.gpus_attributed,
            gpus_reported=job.num_gpus,
            hardware_mfu=account.hardware_mfu,
            hardware_estimate_source=account.hardware_estimate_source,
            mfu=job.latest.mfu if job.latest and _reporting(job) else None,
            dtype=job.dtype,
            pool=account.pool,
            tensor_active_spread=account.tensor_spread,
            gpus_scheduled=job.gpus_scheduled if job.status == "running" else None,
            **_sharing(account),
        )
        for group in groups:
            if job.status == "pending":
                group.jobs_pending += 1
            else:
                group.jobs_running += 1
            group.gpus_allocated += allocated
            if job.status == "running" or job.queued:
                group.gpus_requested += _requested(job, allocated)
    for job_id, account in hardware.items():
        if job_id not in jobs:
            summary.allocated[job_id] = account.gpus_attributed
            summary.jobs[job_id] = JobAccount(
                status="unregistered",
                reporting=False,
                gpus_attributed=account.gpus_attributed,
                gpus_reported=None,
                hardware_mfu=account.hardware_mfu,
                hardware_estimate_source=account.hardware_estimate_source,
                pool=account.pool,
                **_sharing(account),
            )
    for job_account in summary.jobs.values():
        summary.gpus_unverified += job_account.gpus_unverified
        summary.jobs_gpu_mismatch += job_account.gpu_count_mismatch
    summary.capacity = capacity(snapshot, summary.allocated)
    return summary
