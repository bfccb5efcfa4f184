"""Windowed usage: where a window's GPU-seconds went, per pool, team and the cluster (``GET /v1/usage``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mfumon.api.schemas.jobs import WaterfallEntry


class UsageGroup(BaseModel):
    """The GPU-seconds of the cluster, a pool or a team in the window, by waterfall category."""

    name: str | None = Field(description="the pool or team; null for the cluster")
    total_gpu_seconds: float = Field(description="the waterfall's sum (idle and unreported GPUs included)")
    jobs_gpu_seconds: float = Field(description="allocated GPU-seconds of jobs that report (no idle, no unreported)")
    waterfall: list[WaterfallEntry]
    goodput_ratio: float | None = Field(description="productive step time / jobs' allocated time")
    mfu: float | None = Field(description="useful model FLOPs / dense peak FLOPs over the jobs' allocated time")
    compute_mfu: float | None = Field(description="model FLOPs / dense peak FLOPs over compute time only")
    model_flops: float
    peak_flops: float


class EndCount(BaseModel):
    kind: str
    outcome: str
    count: float


class UsagePublic(BaseModel):
    """A window's accounting, read from the durable counters' hourly rows (whole hours: README, "Windows")."""

    since: float = Field(description="start of the window, rounded down to the hour (Unix seconds)")
    until: float = Field(description="end of the window, rounded up to the hour (Unix seconds)")
    bucket_seconds: int
    cluster: UsageGroup
    pools: list[UsageGroup]
    teams: list[UsageGroup]
    ends: list[EndCount] = Field(description="jobs ended in the window, by kind and outcome")
