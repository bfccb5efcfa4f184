"""What the diagnosis rules look at: one job's waterfall, its latest report and its GPUs, as plain values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mfumon.api.accounting import STEP_CATEGORIES
from mfumon.api.state.collective_ranks import LinkFigure, WaitedRank
from mfumon.api.state.profiles import ProfileFigures


@dataclass(frozen=True, slots=True)
class RegressionFact:
    """A software change the fleet comparison called a regression, and this job runs the new version (issue 59)."""

    component: str
    before: str
    after: str
    relative_change: float  # (MFU after - MFU before) / MFU before, < 0
    confidence: float
    also_changed: tuple[str, ...] = ()  # "pytorch 2.5.1 -> 2.6.0", ...: other components that changed too


@dataclass(frozen=True, slots=True)
class CollectiveNodeFact:
    """One node's share of a process group of the job, over its agent's last NCCL Inspector interval (issue 61)."""

    node: str
    group: str
    bus_bandwidth: float | None  # bytes/s: bus bytes / GPU-timed seconds; None without GPU-timed collectives
    time_ratio: float | None  # the node's ranks' time in the group's collective kernels
    crosses_nodes: bool  # the group has ranks on other nodes (its traffic goes over the network)
    expected: float | None  # bytes/s a rank can expect across nodes: the node's active ports' rate / its ranks


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """One of the job's GPUs as its exporter last reported it, with its health."""

    node: str
    index: int
    uuid: str
    utilization: float | None = None
    sm_active: float | None = None
    tensor_active: float | None = None
    sm_clock_hz: float | None = None
    max_sm_clock_hz: float | None = None
    power_watts: float | None = None
    throttle_reasons: tuple[str, ...] = ()  # the throttling ones only (power, thermal, hardware slowdown)
    failing: tuple[str, ...] = ()  # GPU health checks it fails
    node_failing: tuple[str, ...] = ()  # node health checks its node fails (links: InfiniBand, RoCE)

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_reasons) or any(c in ("thermal", "hw_slowdown") for c in self.failing)

    @property
    def clock_ratio(self) -> float | None:
        if self.sm_clock_hz is None or not self.max_sm_clock_hz:
            return None
        return self.sm_clock_hz / self.max_sm_clock_hz


@dataclass(frozen=True, slots=True)
class EngineEstimateFacts:
    """A serving job's last interval counted twice: our FLOP/s and its engine's own (--enable-mfu-metrics)."""

    ours_flops_per_second: float
    engine_flops_per_second: float
    engine: str | None = None  # vllm | sglang: whose FLOPs convention
    ours_mfu: float | None = None
    engine_mfu: float | None = None
    ours_convention: str = "2N"  # 2N | 2N+attention | override (the job's model.flops_per_token)


@dataclass(frozen=True, slots=True)
class ServingIntervalFacts:
    """One report of a serving job within the diagnosis window (None: the engine does not export it)."""

    at: float  # aggregator time of the report
    prefill_tokens_per_second: float | None = None
    decode_tokens_per_second: float | None = None
    mean_prompt_tokens: float | None = None
    tpot_p90_seconds: float | None = None
    itl_p99_seconds: float | None = None
    ttft_p90_seconds: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    preemptions: int | None = None
    batch_size: float | None = None


@dataclass(frozen=True, slots=True)
class ServingFacts:
    """A serving (inference) job over the diagnosis window: what its engine's counters and histograms say.

    Bounds are (lower, upper): histograms give the share of requests within a target only up to the bucket that
    straddles it, and the joint share (both targets met) only between the Frechet bounds of the two marginals.
    """

    engine: str | None = None  # vllm | sglang | tgi, as the node agent read it
    window_seconds: float = 300.0
    gpus: float | None = None
    requests_per_second: float | None = None  # requests finished per second
    batch_size: float | None = None  # mean over the window
    requests_running: float | None = None  # mean over the window
    requests_waiting: float | None = None  # mean over the window
    kv_cache_usage: float | None = None  # mean over the window
    max_kv_cache_usage: float | None = None
    preemptions: int | None = None  # over the window; None: the engine does not count them
    mbu: float | None = None  # decode MBU, mean over the window
    prefill_mfu: float | None = None
    decode_mfu: float | None = None
    ttft_target_seconds: float | None = None
    tpot_target_seconds: float | None = None
    objective_ratio: float | None = None
    ttft_met: tuple[float, float] | None = None  # share of requests within the TTFT target, bounds
    tpot_met: tuple[float, float] | None = None
    goodput: tuple[float, float] | None = None  # share within both, bounds; None with goodput_reason
    goodput_reason: str | None = None
    ttft_p90_seconds: float | None = None
    tpot_p90_seconds: float | None = None
    itl_p99_seconds: float | None = None
    intervals: tuple[ServingIntervalFacts, ...] = ()  # oldest first
    waterfall: dict[str, float] = field(default_factory=dict)  # serving categories (down, idle, prefill, ...)


@dataclass(frozen=True, slots=True)
class JobFacts:
    job_id: str
    kind: str = "training"
    status: str = "running"
    dtype: str | None = None
    gpu_seconds: dict[str, float] = field(default_factory=dict)  # the waterfall
    compute_mfu: float | None = None
    lifetime_mfu: float | None = None
    mfu: float | None = None  # the latest reported MFU
    baseline_mfu: float | None = None
    signature: str | None = None
    hardware_mfu: float | None = None
    accounting_verdict: str | None = None  # mfumon.mfu.check_accounting: consistent, over_claims, under_claims
    accounting_message: str | None = None
    agreement: float | None = None
    restarts: int = 0
    failures: int = 0
    exit_codes: tuple[int, ...] = ()  # of the failures, oldest first
    checkpoint_saves: int = 0
    checkpoint_save_seconds: float | None = None  # mean seconds of a save, from the events that carry seconds
    tensor_spread: float | None = None  # (max - min) / max tensor activity over the job's GPUs
    step_time_deviation: float | None = None
    recent_step_seconds: tuple[float, ...] = ()
    gpus: tuple[GpuFacts, ...] = ()
    # 0 with busy GPUs: a job seen only through its hardware counters; None: not known (facts built by hand)
    reports_received: int | None = None
    profile: ProfileFigures | None = None  # the job's latest on-demand profile (issue 32)
    engine_estimate: EngineEstimateFacts | None = None  # serving jobs whose engine estimates its own FLOPs
    serving: ServingFacts | None = None  # inference jobs: the engine's view over the diagnosis window
    regressions: tuple[RegressionFact, ...] = ()  # software changes called regressions whose new version it runs
    collectives: tuple[CollectiveNodeFact, ...] = ()  # NCCL Inspector, per node and process group (issue 61)
    # ... per rank: each collective rank against its communicator's median, the rank its peers wait for first
    waited_ranks: tuple[WaitedRank, ...] = ()
    links: tuple[LinkFigure, ...] = ()  # ... point-to-point per group and pair of nodes, the slowest first
    links_unmapped: int = 0  # point-to-point rows left out of ``links``: their peer's node is unknown

    @property
    def total(self) -> float:
        return sum(self.gpu_seconds.values())

    @property
    def step_gpu_seconds(self) -> float:
        """Allocated time spent stepping (compute, and the waits inside steps)."""
        return sum(self.gpu_seconds.get(c, 0.0) for c in STEP_CATEGORIES)

    @property
    def goodput(self) -> float | None:
        total = self.total
        return self.step_gpu_seconds / total if total > 0 else None

    def share(self, gpu_seconds: float) -> float:
        total = self.total
        return gpu_seconds / total if total > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Finding:
    """A cause, the GPU-seconds it puts at stake, the numbers that show it, and what to try."""

    cause: str
    gpu_seconds: float
    evidence: dict[str, Any]
    advice: str
