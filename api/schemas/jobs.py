"""Job request and response bodies (the wire contract of ``../shared/interface.md``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mfumon.api.schemas._common import (
    MAX_TOKENS_PER_SECOND,
    Count,
    Dtype,
    ExitCode,
    Flag,
    Kind,
    Label,
    Number,
    ParamCount,
    PositiveInt,
    Ratio,
    Seconds,
    Step,
    StorageDtype,
    TokensPerSecond,
    Whole,
    ZeroOr,
    given,
    null,
)
from mfumon.api.schemas.profiles import ProfileRequestNotice
from mfumon.mfu import JobEstimateSource

_BIG = Annotated[Number, Field(gt=0, le=1e30)]
_PARAMS = Annotated[float, ParamCount()]  # a number, or "7B", "8.03e9" as on the command line
# A divisor's floor keeps every quotient finite: no accelerator is below 1 GFLOP/s or 1 MB/s.
_PEAK_FLOPS = Annotated[Number, Field(ge=1e9, le=1e30, description="FLOP/s, from 1e9 to 1e30")]
_PEAK_BANDWIDTH = Annotated[Number, Field(ge=1e6, le=1e30, description="bytes/s, from 1e6 to 1e30")]
_BUSY = Annotated[float, ZeroOr(1e-3, 1e9)]
_TOKENS = Annotated[Number, Field(gt=0, le=1e9)]
_ENGINE_ESTIMATE = Annotated[Number, Field(ge=0, le=1e30)]


class ModelSpec(BaseModel):
    """What the FLOPs formula needs: ``params`` or an explicit ``flops_per_token``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": "What the FLOPs formula needs: `params` or `flops_per_token` (not null). Besides: "
            "`active_params` at most `params`, `kv_heads` at most `heads` (422 naming `model` otherwise).",
            "anyOf": [given("params"), given("flops_per_token", flops_per_token="number")],
        },
    )

    name: Label | None = None
    params: _PARAMS | None = None
    active_params: _PARAMS | None = None
    layers: PositiveInt | None = None
    heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    seq_len: PositiveInt | None = None
    flops_per_token: _BIG | None = None
    kv_heads: PositiveInt | None = None  # key/value heads (GQA; 1 for MQA); the KV cache's size, for MBU

    @model_validator(mode="after")
    def _needs_params_or_flops(self) -> ModelSpec:
        if self.params is None and self.flops_per_token is None:
            raise ValueError("model needs 'params' or 'flops_per_token'")
        if self.active_params is not None and self.params is not None and self.active_params > self.params:
            raise ValueError("model.active_params cannot exceed model.params")
        if self.kv_heads is not None and self.heads is not None and self.kv_heads > self.heads:
            raise ValueError("model.kv_heads cannot exceed model.heads")
        return self


class SloTargets(BaseModel):
    """A serving job's latency targets (DistServe's SLO goodput: a request counts when it meets both). Each one
    left out comes from the job's pool, else the aggregator's defaults (``MFUMON_SLO_*``)."""

    model_config = ConfigDict(extra="forbid")

    ttft_seconds: Annotated[Number, Field(gt=0, le=3600)] | None = Field(
        None, description="time to first token a request must not exceed"
    )
    tpot_seconds: Annotated[Number, Field(gt=0, le=60)] | None = Field(
        None, description="a request's mean time per output token (after the first) must not exceed this"
    )
    objective_ratio: Annotated[Number, Field(gt=0, le=1)] | None = Field(
        None, description="share of requests that must meet both targets (the alert's threshold)"
    )


MAX_HISTOGRAM_BUCKETS = 64


class LatencyHistogram(BaseModel):
    """What an engine's latency histogram counted over the interval: the increase of its cumulative buckets.

    ``counts[i]`` observations were at most ``le[i]`` seconds (cumulative, as Prometheus prints them); ``count`` is
    all of them (the ``+Inf`` bucket), ``sum`` their total seconds.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": "The increase of a latency histogram over the interval. Besides what the schema states: "
            "`le` strictly ascending, `counts` as many as `le` and non-decreasing (cumulative), `count` at least the "
            "last of `counts` (422 naming the histogram otherwise)."
        },
    )

    le: list[Annotated[Number, Field(gt=0, le=1e7)]] = Field(max_length=MAX_HISTOGRAM_BUCKETS)
    counts: list[Count] = Field(max_length=MAX_HISTOGRAM_BUCKETS)
    count: Count
    sum: Annotated[Number, Field(ge=0, le=1e15)]

    @model_validator(mode="after")
    def _cumulative(self) -> LatencyHistogram:
        if len(self.le) != len(self.counts):
            raise ValueError("'le' and 'counts' must have the same length")
        if any(b <= a for a, b in zip(self.le, self.le[1:], strict=False)):
            raise ValueError("'le' must be strictly ascending")
        if any(b < a for a, b in zip(self.counts, self.counts[1:], strict=False)):
            raise ValueError("'counts' are cumulative: each at least the one before")
        if self.counts and self.counts[-1] > self.count:
            raise ValueError("'count' (all observations) must be at least the last cumulative count")
        return self


class Parallelism(BaseModel):
    """How the model is laid out over the job's GPUs (Megatron's names). With it, runs that differ only in the
    data-parallel degree share a baseline: the GPU count is then num_gpus = data x tensor x pipeline x context, and
    each GPU does the same work whatever the data-parallel degree (README, "Baselines")."""

    model_config = ConfigDict(extra="forbid")

    tensor: PositiveInt = 1
    pipeline: PositiveInt = 1
    context: PositiveInt = 1
    expert: PositiveInt = 1
    micro_batch_size: PositiveInt = Field(description="sequences per model replica per forward/backward pass")
    gradient_accumulation: PositiveInt | None = Field(
        default=None, description="micro-batches per optimizer step, when fixed (it sets how often gradients sync)"
    )

    def model_parallel_size(self) -> int:
        """GPUs one model replica spans: the GPU count must be a multiple of it."""
        return self.tensor * self.pipeline * self.context


_LAYOUT_RULE = (
    "With `parallelism`, `num_gpus` (when given) is a multiple of tensor x pipeline x context (422 naming "
    "`parallelism` otherwise)."
)


#: A job's software fingerprint (issue 59): component -> version, e.g. {"pytorch": "2.5.1", "nccl": "2.21.5",
#: "driver": "550.54.15", "tag.experiment": "lr-sweep"}; bounded like the reporter bounds it
#: (mfumon.exporter.job.fingerprint).
SOFTWARE_KEY = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
SoftwareVersion = Annotated[str, Field(min_length=1, max_length=256)]


def _software_keys(value: dict[str, str]) -> dict[str, str]:
    bad = sorted(key for key in value if not SOFTWARE_KEY.match(key))
    if bad:
        raise ValueError(f"component names are 1 to 64 of A-Z a-z 0-9 _ . + -, got {bad[:3]}")
    return value


# The keys' rule is stated as ``propertyNames`` (what a client, and Schemathesis, reads) and checked by a validator:
# a constrained dict key would become ``patternProperties``, which lets any other key through in JSON Schema.
Software = Annotated[
    dict[str, SoftwareVersion],
    Field(max_length=64, json_schema_extra={"propertyNames": {"pattern": SOFTWARE_KEY.pattern}}),
    AfterValidator(_software_keys),
]


class JobFields(BaseModel):
    """Metadata fields shared by ``PUT /v1/jobs/{id}`` and job reports; all optional."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"description": f"A job's metadata. {_LAYOUT_RULE}"})

    kind: Kind | None = None
    num_gpus: PositiveInt | None = None
    gpu_model: Label | None = None
    dtype: Dtype | None = None
    model: ModelSpec | None = None
    peak_flops_per_gpu: _PEAK_FLOPS | None = None
    gpus_requested: PositiveInt | None = None
    recompute_activations: Flag | None = None
    name: Label | None = None
    team: Label | None = None
    pool: Label | None = None
    parallelism: Parallelism | None = None
    # --- inference: how the served model is stored, for MBU (default: the dtype's own storage) ---
    weight_dtype: StorageDtype | None = None
    kv_cache_dtype: StorageDtype | None = None
    peak_memory_bandwidth_per_gpu: _PEAK_BANDWIDTH | None = None
    slo: SloTargets | None = Field(None, description="serving: latency targets for SLO goodput (inference jobs)")
    software: Software | None = Field(
        None,
        description="the job's software fingerprint, component -> version (python, pytorch, cuda, cudnn, nccl, "
        "driver, frameworks, container_image, tag.<key> for the user's tags); components sent later are added",
    )


class JobUpdate(JobFields):
    """``PUT /v1/jobs/{job_id}``: register a job (pending until it reports) or update its metadata."""


_PHASES = ("prefill_tokens", "decode_tokens")
_ENGINE_FIELDS = (  # only beside the phases
    "engine_flops_per_gpu",
    "engine_bytes_per_gpu",
    "engine_estimator",
    "engine",
    "requests_finished",
    "preemptions",
    "request_running_seconds",
    "ttft_histogram",
    "tpot_histogram",
    "itl_histogram",
    "queue_histogram",
)


class JobReportCreate(JobFields):
    """``POST /v1/jobs/{job_id}/reports``: throughput over the last interval, whole job."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": "Throughput over the last interval, whole job: `tokens_per_second`; or `tokens` and "
            "`interval_seconds`; or (inference) `prefill_tokens` and/or `decode_tokens` with `interval_seconds`. "
            "Besides what the schema states: `tokens` (or prefill_tokens + decode_tokens) / `interval_seconds` "
            f"at most {MAX_TOKENS_PER_SECOND:g}; with "
            "the phases, `tokens` (if given) equals prefill_tokens + decode_tokens, and the job's kind (sent now "
            "or before; default training) is inference; the job's model must be known (sent now or before). "
            f"{_LAYOUT_RULE}",
            "anyOf": [
                {
                    "title": "rate",
                    **given("tokens_per_second", tokens_per_second="number"),
                    "allOf": [null("tokens", "interval_seconds", *_PHASES, *_ENGINE_FIELDS)],
                },
                {
                    "title": "count",
                    **given("tokens", "interval_seconds", tokens="integer", interval_seconds="number"),
                    "allOf": [null("tokens_per_second", *_PHASES, *_ENGINE_FIELDS)],
                },
                {
                    "title": "phases",
                    **given("interval_seconds", interval_seconds="number"),
                    "allOf": [
                        null("tokens_per_second"),
                        {"anyOf": [given(name, **{name: "integer"}) for name in _PHASES]},
                        {"properties": {"kind": {"enum": ["inference", None]}}},
                    ],
                },
            ],
        },
    )

    tokens_per_second: TokensPerSecond | None = None
    tokens: Count | None = None
    # At least a millisecond, so that every per-second rate derived from a count stays finite.
    interval_seconds: Annotated[Number, Field(ge=1e-3, le=1e7)] | None = None
    step_seconds: Seconds | None = None
    comm_seconds: Seconds | None = None
    data_wait_seconds: Seconds | None = None
    bubble_seconds: Seconds | None = Field(
        default=None, description="pipeline-parallel bubble per step (stages idle at a flush), mean over the interval"
    )
    step: Step | None = None
    comm_source: Literal["hooks", "framework_timers"] | None = Field(
        default=None, description="what measured comm_seconds: autograd hooks (DDP/FSDP) or the framework's timers"
    )
    profiled_steps: Annotated[int, Whole(0, 10_000_000)] | None = Field(
        default=None, description="steps of the interval run under the profiler: kept out of baselines"
    )
    # --- inference: the interval split by phase, and what MBU needs (see api/mfu/_serving.py) ---
    prefill_tokens: Count | None = None  # prompt tokens computed in the interval (prefix-cache hits excluded)
    decode_tokens: Count | None = None  # tokens generated in the interval
    batch_size: Annotated[Number, Field(gt=0, le=1e7)] | None = Field(
        None, validation_alias=AliasChoices("batch_size", "concurrency")
    )
    context_tokens: _TOKENS | None = None  # mean context length of a sequence being decoded
    mean_prompt_tokens: _TOKENS | None = None  # mean prompt length (the prefill attention span)
    prefill_busy_seconds: _BUSY | None = None  # time the engine spent in prefill in the interval (0: none)
    decode_busy_seconds: _BUSY | None = None
    requests_running: Count | None = None
    requests_waiting: Count | None = None
    kv_cache_usage: Ratio | None = None
    # The serving engine's own estimate over the interval (vLLM/SGLang --enable-mfu-metrics), the mean GPU's.
    engine_flops_per_gpu: _ENGINE_ESTIMATE | None = Field(
        None, description="FLOPs one GPU did in the interval as the serving engine estimates them (its own MFU)"
    )
    engine_bytes_per_gpu: _ENGINE_ESTIMATE | None = Field(
        None, description="bytes one GPU read and wrote in the interval as the serving engine estimates them"
    )
    engine_estimator: Literal["vllm", "sglang"] | None = Field(
        None, description="the engine whose estimate engine_flops_per_gpu is (each counts FLOPs its own way)"
    )
    # What the serving engine's request histograms and counters say about the interval (SLO goodput, waterfall).
    engine: Literal["vllm", "sglang", "tgi"] | None = Field(None, description="the serving engine that was read")
    requests_finished: Count | None = Field(None, description="requests that finished in the interval")
    preemptions: Count | None = Field(None, description="requests the engine preempted in the interval")
    request_running_seconds: Annotated[Number, Field(ge=0, le=1e12)] | None = Field(
        None, description="seconds the requests finished in the interval spent running (summed over requests)"
    )
    ttft_histogram: LatencyHistogram | None = Field(None, description="time to first token, per request")
    tpot_histogram: LatencyHistogram | None = Field(
        None, description="time per output token, one observation per request (its mean): never per token"
    )
    itl_histogram: LatencyHistogram | None = Field(None, description="inter-token latency, one observation per token")
    queue_histogram: LatencyHistogram | None = Field(None, description="time waiting in the queue, per request")

    @field_validator("interval_seconds")
    @classmethod
    def _bounded_rate(cls, interval: float | None, info: ValidationInfo) -> float | None:
        tokens = info.data.get("tokens")
        if interval is not None and tokens is not None and tokens / interval > MAX_TOKENS_PER_SECOND:
            raise ValueError(f"tokens / interval_seconds exceeds {MAX_TOKENS_PER_SECOND:g} tokens per second")
        return interval

    @field_validator("prefill_tokens", "decode_tokens")
    @classmethod
    def _bounded_phase_rate(cls, tokens: int | None, info: ValidationInfo) -> int | None:
        interval = info.data.get("interval_seconds")
        earlier = info.data.get("prefill_tokens") if info.field_name == "decode_tokens" else None
        total = (tokens or 0) + (earlier or 0)
        if interval is not None and total / interval > MAX_TOKENS_PER_SECOND:
            raise ValueError(
                f"(prefill_tokens + decode_tokens) / interval_seconds exceeds {MAX_TOKENS_PER_SECOND:g} tokens per "
                "second"
            )
        return tokens

    @model_validator(mode="after")
    def _throughput(self) -> JobReportCreate:
        has_rate = self.tokens_per_second is not None
        has_count = self.tokens is not None or self.interval_seconds is not None
        if self.has_phases():
            return self._phase_throughput()
        given_engine = [name for name in _ENGINE_FIELDS if getattr(self, name) is not None]
        if given_engine:
            raise ValueError(f"{', '.join(given_engine)} go with 'prefill_tokens'/'decode_tokens'")
        if has_rate and has_count:
            raise ValueError("give either 'tokens_per_second' or 'tokens' with 'interval_seconds', not both")
        if not has_rate and (self.tokens is None or self.interval_seconds is None):
            raise ValueError("need 'tokens_per_second', or both 'tokens' and 'interval_seconds'")
        return self

    def _phase_throughput(self) -> JobReportCreate:
        if self.interval_seconds is None:
            raise ValueError("'prefill_tokens' and 'decode_tokens' need 'interval_seconds'")
        if self.tokens_per_second is not None:
            raise ValueError("give 'prefill_tokens'/'decode_tokens' with 'interval_seconds', not 'tokens_per_second'")
        phase_total = (self.prefill_tokens or 0) + (self.decode_tokens or 0)
        if self.tokens is not None and self.tokens != phase_total:
            raise ValueError(f"'tokens' ({self.tokens}) must equal prefill_tokens + decode_tokens ({phase_total})")
        return self

    def has_phases(self) -> bool:
        """True when the report splits its tokens into prefill and decode (an inference engine's counters)."""
        return self.prefill_tokens is not None or self.decode_tokens is not None

    def rate(self) -> float:
        """Whole-job tokens per second over the interval."""
        if self.tokens_per_second is not None:
            return self.tokens_per_second
        assert self.interval_seconds is not None
        tokens = self.tokens if self.tokens is not None else (self.prefill_tokens or 0) + (self.decode_tokens or 0)
        return tokens / self.interval_seconds


class JobEnd(BaseModel):
    """``POST /v1/jobs/{job_id}/end``; the body is optional."""

    model_config = ConfigDict(extra="forbid")

    exit_code: ExitCode | None = None


class ReportResult(BaseModel):
    """What a job report produced: the job's MFU now, or null with the reason."""

    job_id: str
    mfu: float | None
    hfu: float | None = None
    reason: str | None = None
    flops_per_token: float | None
    model_flops_per_second: float | None
    peak_flops_per_second: float | None
    peak_flops_per_gpu: float | None = None
    tokens_per_second: float
    num_gpus: int | None = None
    gpu_model: str | None = None
    device: str | None = None
    dtype: str
    comm_ratio: float | None = None
    data_wait_ratio: float | None = None
    step_seconds: float | None = None
    baseline_mfu: float | None = None
    baseline_signature: str | None = None
    mbu: float | None = None
    engine_mfu: float | None = Field(None, description="the serving engine's own MFU estimate, beside ours (mfu)")
    inference: dict[str, Any] | None = None  # phases, MBU inputs, formulas and estimates (inference reports)
    comm_source: str | None = Field(
        None,
        description="what comm_ratio comes from: hooks, framework_timers, profile, or inspector (NCCL Inspector's "
        "time in collectives now, at the overlap the job's last profile found)",
    )
    profile_request: ProfileRequestNotice | None = Field(
        None, description="a profile asked of the job: its reporter profiles the next `steps` steps on `ranks`"
    )


class JobReportPublic(BaseModel):
    """One entry of a job's history."""

    received_at: float
    tokens_per_second: float
    num_gpus: int | None
    mfu: float | None
    hfu: float | None
    model_flops_per_second: float | None
    comm_ratio: float | None
    data_wait_ratio: float | None
    step_seconds: float | None
    step: int | None
    reason: str | None
    hardware_mfu: float | None = Field(
        None, description="the hardware's estimate over the job's GPUs when the report arrived (tensor x clocks)"
    )
    mbu: float | None = None
    prefill_tokens_per_second: float | None = None
    decode_tokens_per_second: float | None = None
    prefill_mfu: float | None = None
    decode_mfu: float | None = None
    serving: dict[str, Any] | None = Field(
        None,
        description="a serving report's request figures: requests_per_second, ttft/tpot/itl/queue p50/p90/p99 "
        "(seconds, interpolated in their bucket), slo_counts (per target: [requests, within at least, within at "
        "most]), slo_goodput_ratio and slo_goodput_upper_ratio over the window as of this report, kv_cache_usage, "
        "requests_running, requests_waiting, batch_size, preemptions, prefill_mfu, decode_mfu, mbu",
    )


class AccountingPublic(BaseModel):
    """The reported MFU checked against the hardware estimate: which way it is off, and what to look at."""

    verdict: str = Field(description="consistent | over_claims | under_claims | unchecked")
    message: str


class WaterfallEntry(BaseModel):
    """One category of a waterfall: GPU-seconds allocated and what they went to."""

    category: str
    gpu_seconds: float


class JobPublic(BaseModel):
    """A job as the JSON API shows it."""

    job_id: str
    status: str
    kind: str
    name: str | None
    team: str | None
    pool: str | None
    gpu_model: str | None
    dtype: str
    weight_dtype: str | None = None
    kv_cache_dtype: str | None = None
    num_gpus: int | None
    gpus_requested: int | None
    gpus_allocated: int = Field(description="GPUs exporters attribute to the job: its GPUs, whatever num_gpus says")
    gpus_reported: int | None = Field(default=None, description="num_gpus as the job reports it")
    gpus_attributed: int = Field(default=0, description="GPUs exporters attribute to the job")
    gpus_unverified: int = Field(default=0, description="GPUs reported beyond those exporters attribute")
    gpus_shared: int = Field(
        default=0, description="of the attributed GPUs, those the job shares with other jobs (time-slicing, MPS)"
    )
    gpu_share: float | None = Field(
        default=None,
        description="GPU-equivalents the job holds: its whole GPUs plus its share of each shared one; its "
        "GPU-seconds, waterfall and hardware estimate count this much",
    )
    share_method: str | None = Field(
        default=None,
        description="how its shares were measured: process_utilization | accounting | equal_split (the least "
        "precise of its shared GPUs); null when it shares none",
    )
    hardware_mfu: float | None = Field(
        default=None, description="tensor-pipe activity x SM clock / max SM clock, mean over the job's GPUs"
    )
    hardware_estimate_source: JobEstimateSource | None = Field(
        default=None,
        description="where hardware_mfu came from: cycle_counters or ratio_clock when every GPU behind it used that "
        "source (exact cycle-counter differences, or a sampled ratio), mixed otherwise; null without an estimate",
    )
    mfu_hardware_agreement: float | None = Field(default=None, description="reported MFU / hardware_mfu")
    accounting: AccountingPublic | None = None
    model: dict[str, Any] | None
    created_at: float
    started_at: float | None
    last_report_at: float | None
    ended_at: float | None
    exit_code: int | None
    outcome: str | None = Field(default=None, description="success, failure, unknown or expired, once ended")
    restarts: int = 0
    failures: int = 0
    total_gpu_seconds: float = Field(default=0.0, description="allocated GPU-seconds so far (the waterfall's sum)")
    waterfall: list[WaterfallEntry] = []
    goodput_ratio: float | None = None
    lifetime_mfu: float | None = None
    compute_mfu: float | None = None
    summary: dict[str, Any] | None = Field(default=None, description="lifetime summary, frozen when the job ended")
    reports_received: int
    latest: dict[str, Any] | None
    baseline_mfu: float | None
    mfu_vs_baseline: float | None
    parallelism: dict[str, int] | None = None
    baseline_signature: str | None = Field(
        default=None, description="the workload signature the job is compared under (GET /v1/baselines/{signature})"
    )
    slo: dict[str, float] | None = Field(default=None, description="the latency targets the job itself sent")
    software: dict[str, str] | None = Field(
        default=None,
        description="the job's software fingerprint (component -> version) as it sent it, and the driver, "
        "cuda_driver and vbios the agents of its nodes report where it sent none (versions that differ across its "
        "nodes joined with '|')",
    )
    energy_joules: float | None = Field(
        default=None, description="energy its GPUs drew since it started (a shared GPU by its share); null: none known"
    )
    energy_estimated_joules: float | None = Field(
        default=None, description="the part of energy_joules estimated from power samples rather than energy counters"
    )
    joules_per_token: float | None = Field(
        default=None, description="energy_joules / tokens (training: processed; serving: output tokens)"
    )
    joules_per_request: float | None = Field(default=None, description="serving: energy_joules / requests completed")
    cost: float | None = Field(
        default=None,
        description="its GPU-hours and energy at the prices in effect when each was billed, in `currency`; null "
        "when nothing of it is priced (see unpriced_gpu_seconds), never 0 for lack of a price",
    )
    currency: str | None = Field(default=None, description="the price list's currency")
    unpriced_gpu_seconds: float | None = Field(default=None, description="its GPU-seconds no price covers")
    cost_per_million_tokens: float | None = None
    slo_goodput_ratio: float | None = Field(
        default=None,
        description="serving: at least this share of the window's requests met both the TTFT and TPOT targets "
        "(serving.slo_goodput has the upper bound, the rate and the method)",
    )
    serving_waterfall: list[WaterfallEntry] | None = Field(
        default=None,
        description="serving: allocated GPU-seconds by down, idle, prefill, decode, recompute and busy (phase "
        "unknown); sums to total_gpu_seconds",
    )
    serving: dict[str, Any] | None = Field(
        default=None,
        description="serving: targets and where each came from, SLO goodput over the window (bounds, rate, method, "
        "or the reason there is none), the newest interval's latency percentiles, request rate, queue, KV-cache "
        "use and preemptions over the window",
    )
    gpus: list[dict[str, Any]] = []
    history: list[JobReportPublic] = []
    health: dict[str, Any] | None = None  # the job's unhealthy/throttled GPUs and nodes (GET /v1/jobs/{job_id})
    # From the scheduler adapter that lists the job (null for jobs no scheduler reports).
    source: str | None = None
    submitted_at: float | None = None
    queued_at: float | None = None
    pending_reason: str | None = None
    scheduler_restarts: int | None = None  # the scheduler's requeue count (Slurm restart_cnt)
    placement: dict[str, int] | None = None
    end_state: str | None = None


class JobsPublic(BaseModel):
    data: list[JobPublic]
    count: int = Field(description="Jobs in this page.")
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; null on the last page.")
