"""``GET /v1/compare``: two jobs side by side, before and after."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class CompareSide(BaseModel):
    """One job as the comparison reads it: from its live ledger while it runs, from its summary once it ended."""

    job_id: str
    status: str
    kind: str
    source: str = Field(description="ledger (the job runs or has no summary) | summary (frozen when it ended)")
    signature: str | None = Field(description="its workload signature (GET /v1/baselines/{signature})")
    device: str | None
    num_gpus: int | None
    dtype: str
    model: dict[str, Any] | None
    started_at: float | None
    ended_at: float | None
    outcome: str | None
    baseline_mfu: float | None


class CompareRow(BaseModel):
    """One figure of both jobs: ``delta`` = b - a, ``ratio`` = b ÷ a (null when either is unknown, or a is 0)."""

    metric: str
    a: float | None
    b: float | None
    delta: float | None
    ratio: float | None


class WaterfallDelta(BaseModel):
    """One waterfall category in both jobs, as GPU-seconds and as a share of each job's allocated time (jobs of
    different lengths compare by share); ``share_delta`` = b's share - a's, in ratio points."""

    category: str
    a_gpu_seconds: float
    b_gpu_seconds: float
    a_share: float | None
    b_share: float | None
    share_delta: float | None


class ComparePublic(BaseModel):
    a: CompareSide
    b: CompareSide
    same_signature: bool = Field(description="both run the same workload signature: a like-for-like comparison")
    rows: list[CompareRow] = Field(
        description="mfu (time-weighted over the reports), tokens_per_second_per_gpu (the same, as throughput), "
        "latest_mfu, lifetime_mfu, compute_mfu, goodput_ratio, gpu_hours, num_gpus, restarts, failures"
    )
    waterfall: list[WaterfallDelta]
