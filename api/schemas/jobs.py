"""Job request and response bodies (the wire contract of ``../shared/interface.md``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.schemas._common import Count, Dtype, Kind, Label, NonNegativeFloat, PositiveFloat, PositiveInt

_BIG = Annotated[float, Field(gt=0, le=1e30, allow_inf_nan=False)]


class ModelSpec(BaseModel):
    """What the FLOPs formula needs: ``params`` or an explicit ``flops_per_token``."""

    model_config = ConfigDict(extra="forbid")

    name: Label | None = None
    params: _BIG | None = None
    active_params: _BIG | None = None
    layers: PositiveInt | None = None
    heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    seq_len: PositiveInt | None = None
    flops_per_token: _BIG | None = None

    @model_validator(mode="after")
    def _needs_params_or_flops(self) -> ModelSpec:
        if self.params is None and self.flops_per_token is None:
            raise ValueError("model needs 'params' or 'flops_per_token'")
        if self.active_params is not None and self.params is not None and self.active_params > self.params:
            raise ValueError("model.active_params cannot exceed model.params")
        return self


class JobFields(BaseModel):
    """Metadata fields shared by ``PUT /v1/jobs/{id}`` and job reports; all optional."""

    model_config = ConfigDict(extra="forbid")

    kind: Kind | None = None
    num_gpus: PositiveInt | None = None
    gpu_model: Label | None = None
    dtype: Dtype | None = None
    model: ModelSpec | None = None
    peak_flops_per_gpu: _BIG | None = None
    gpus_requested: PositiveInt | None = None
    recompute_activations: bool | None = None
    name: Label | None = None
    team: Label | None = None
    pool: Label | None = None


class JobUpdate(JobFields):
    """``PUT /v1/jobs/{job_id}``: register a job (pending until it reports) or update its metadata."""


class JobReportCreate(JobFields):
    """``POST /v1/jobs/{job_id}/reports``: throughput over the last interval, whole job."""

    tokens_per_second: PositiveFloat | None = None
    tokens: Count | None = None
    interval_seconds: PositiveFloat | None = None
    step_seconds: NonNegativeFloat | None = None
    comm_seconds: NonNegativeFloat | None = None
    data_wait_seconds: NonNegativeFloat | None = None
    step: Count | None = None

    @model_validator(mode="after")
    def _throughput(self) -> JobReportCreate:
        has_rate = self.tokens_per_second is not None
        has_count = self.tokens is not None or self.interval_seconds is not None
        if has_rate and has_count:
            raise ValueError("give either 'tokens_per_second' or 'tokens' with 'interval_seconds', not both")
        if not has_rate and (self.tokens is None or self.interval_seconds is None):
            raise ValueError("need 'tokens_per_second', or both 'tokens' and 'interval_seconds'")
        return self

    def rate(self) -> float:
        """Whole-job tokens per second over the interval."""
        if self.tokens_per_second is not None:
            return self.tokens_per_second
        assert self.tokens is not None and self.interval_seconds is not None
        return self.tokens / self.interval_seconds


class JobEnd(BaseModel):
    """``POST /v1/jobs/{job_id}/end``; the body is optional."""

    model_config = ConfigDict(extra="forbid")

    exit_code: Annotated[int, Field(ge=-1024, le=1024)] | None = None


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
    num_gpus: int | None
    gpus_requested: int | None
    gpus_allocated: int
    model: dict[str, Any] | None
    created_at: float
    started_at: float | None
    last_report_at: float | None
    ended_at: float | None
    exit_code: int | None
    reports_received: int
    latest: dict[str, Any] | None
    baseline_mfu: float | None
    mfu_vs_baseline: float | None
    gpus: list[dict[str, Any]] = []
    history: list[JobReportPublic] = []


class JobsPublic(BaseModel):
    data: list[JobPublic]
    count: int
