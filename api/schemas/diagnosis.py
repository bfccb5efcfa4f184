"""The diagnosis of one job (``GET /v1/jobs/{job_id}/diagnosis``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mfumon.api.schemas.jobs import WaterfallEntry


class FindingPublic(BaseModel):
    """A cause of lost MFU, the numbers that show it and what to try."""

    cause: str
    gpu_seconds: float = Field(description="GPU-seconds this cause cost the job so far (the findings' ranking)")
    share_of_allocated: float | None = Field(description="gpu_seconds ÷ the job's allocated GPU-seconds")
    evidence: dict[str, Any]
    advice: str


class DiagnosisPublic(BaseModel):
    """Where a job's GPU-seconds went and why, the costliest cause first."""

    job_id: str
    status: str
    total_gpu_seconds: float
    waterfall: list[WaterfallEntry]
    goodput_ratio: float | None
    lifetime_mfu: float | None
    compute_mfu: float | None
    findings: list[FindingPublic]
    reports_received: int = Field(0, description="reports the job sent; 0 for a job seen only through its GPUs")
    reason_code: Literal["no_reports", "ended_before_first_interval", "too_short", "nothing_found"] | None = Field(
        None, description="why there are no findings (null when there are some)"
    )
    reason: str | None = Field(
        None, description="the same in a sentence, with what to do (null when there are findings)"
    )
