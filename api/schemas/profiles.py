"""Profile bodies: ask a running job for a profile, and the summary each profiled rank sends back.

``POST /v1/jobs/{job_id}/profile`` asks (``profile`` scope); the job learns of it in the answer to its next report
(``profile_request`` in `ReportResult`) and each profiled rank posts its summary to ``POST /v1/jobs/{job_id}/profiles``
(``jobs`` scope). The summary is reduced on the node (:mod:`mfumon.exporter.job.profile`); the trace stays there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mfumon.api.schemas._common import CLOCK_SKEW_RULE, Label, Number, Ratio, Seconds, Step, Timestamp, Whole

MAX_PROFILE_STEPS = 20
"""The most steps one profile may cover: the profiler's overhead and the trace grow with every step."""
MAX_LISTED_RANKS = 1024
Group = Literal["tp", "pp", "dp", "ep", "cp", "other"]
RankIndex = Annotated[int, Whole(0, 10_000_000)]
ProfileId = Annotated[int, Whole(1, 2**31 - 1)]


class ProfileRequestCreate(BaseModel):
    """``POST /v1/jobs/{job_id}/profile``: profile the next ``steps`` steps on ``ranks``."""

    model_config = ConfigDict(extra="forbid")

    steps: Annotated[int, Whole(1, MAX_PROFILE_STEPS)] = Field(
        description=f"steps to profile, 1 to {MAX_PROFILE_STEPS}"
    )
    ranks: Literal["all", "sample"] | Annotated[list[RankIndex], Field(min_length=1, max_length=MAX_LISTED_RANKS)] = (
        Field(
            default="sample",
            description="'all', 'sample' (rank 0, the last rank and a few between, at most 8) or a list of ranks",
        )
    )


class ProfileRequestNotice(BaseModel):
    """What the answer to a job's report carries while a profile is asked of it (the job's reporter acts on it)."""

    id: int
    steps: int
    ranks: Literal["all", "sample"] | list[int]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupTimeIn(_Strict):
    group: Group
    comm_seconds: Seconds
    exposed_seconds: Seconds


class CollectiveTimeIn(_Strict):
    collective: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")]
    group: Group
    comm_seconds: Seconds
    exposed_seconds: Seconds
    count: Annotated[int, Whole(0, 10_000_000)]


class KernelTimeIn(_Strict):
    name: Label
    seconds: Seconds
    count: Annotated[int, Whole(0, 10_000_000)]


class StepTimeIn(_Strict):
    step: Step
    span_seconds: Seconds
    compute_seconds: Seconds
    comm_seconds: Seconds
    exposed_comm_seconds: Seconds
    idle_seconds: Seconds


class ProfileSummaryCreate(_Strict):
    """``POST /v1/jobs/{job_id}/profiles``: one rank's profile as its node summarised it (seconds of device time)."""

    profile_id: ProfileId | None = Field(None, description="the request it answers; none for a profile taken unasked")
    rank: RankIndex
    span_seconds: Annotated[Number, Field(gt=0, le=1e7)]
    compute_seconds: Seconds
    comm_seconds: Seconds
    exposed_comm_seconds: Seconds
    idle_seconds: Seconds
    tensor_core_ratio: Ratio | None = None
    groups: Annotated[list[GroupTimeIn], Field(max_length=6)] = []
    collectives: Annotated[list[CollectiveTimeIn], Field(max_length=64)] = []
    steps: Annotated[list[StepTimeIn], Field(max_length=64)] = []
    top_kernels: Annotated[list[KernelTimeIn], Field(max_length=20)] = []
    trace_path: Annotated[str, Field(max_length=1024, pattern=r"^[^\x00-\x1f\x7f]*$")] | None = Field(
        None, description="where the raw trace stays on the rank's node (for Perfetto or HTA)"
    )
    trace_bytes: Annotated[int, Whole(0, 10**12)] | None = None
    captured_at: Timestamp | None = Field(None, description="when the profile began. " + CLOCK_SKEW_RULE)


class ProfileGroupPublic(BaseModel):
    """One parallelism over the profiled ranks: its communication and the exposed part, as shares of device time."""

    group: str
    comm_ratio: float
    exposed_comm_ratio: float


class ProfilePublic(BaseModel):
    """A profile: what was asked, which ranks answered, and the job-wide figures over them."""

    id: int
    job_id: str
    status: str = Field(description="requested | running (the job was told) | done | expired")
    steps: int | None
    ranks: Literal["all", "sample"] | list[int] | None
    requested_by: str | None
    requested_at: float
    delivered_at: float | None
    completed_at: float | None
    ranks_reported: list[int]
    comm_ratio: float | None = Field(None, description="communication kernel time / device time, all groups")
    exposed_comm_ratio: float | None = Field(None, description="communication with no compute kernel running")
    idle_ratio: float | None = Field(None, description="device idle (waiting for the host or data) / device time")
    tensor_core_ratio: float | None = None
    groups: list[ProfileGroupPublic] = []
    summaries: list[dict[str, Any]] = Field([], description="each rank's summary as it sent it")


class ProfilesPublic(BaseModel):
    data: list[ProfilePublic]
    count: int
