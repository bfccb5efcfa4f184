"""``GET /v1/regressions``: software changes and what they did to MFU, per signature (issue 59)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class MfuEstimate(BaseModel):
    """One group's MFU: the mean over its jobs, its 95 % Student t interval, the spread of its jobs."""

    mean: float
    low: float
    high: float
    spread: float = Field(description="the sample standard deviation of the group's jobs' MFU")
    jobs: int


class OtherChange(BaseModel):
    """Another component whose versions differ between the two groups (the change is confounded with it)."""

    component: str
    before: str
    after: str


class RegressionPublic(BaseModel):
    """One component's step from ``before`` to ``after`` within one signature."""

    signature: str
    component: str
    before: str
    after: str
    verdict: Literal["regression", "improvement", "no_change", "too_few_jobs"]
    relative_change: float | None = Field(description="(MFU after - MFU before) / MFU before")
    confidence: float | None = Field(description="1 - the p-value of Welch's t-test of the two means")
    p_value: float | None
    noise: float | None = Field(description="the spread of the jobs on the old software / their mean MFU")
    mfu_before: MfuEstimate | None
    mfu_after: MfuEstimate | None
    step_seconds_before: float | None = Field(description="the median step time of the jobs before")
    step_seconds_after: float | None
    jobs_before: list[str]
    jobs_after: list[str] = Field(description="the jobs compared on the new version")
    affected_jobs: list[str] = Field(description="every job of the signature on the new version")
    gpu_hours_after: float = Field(description="GPU-hours of every job of the signature on the new version")
    confounded: bool = Field(description="other components changed between the two groups too")
    also_changed: list[OtherChange]
    jobs_needed: int = Field(description="jobs each side needs before a change is judged")


class RegressionsPublic(BaseModel):
    since: float
    until: float
    method: str
    changes: list[RegressionPublic]
