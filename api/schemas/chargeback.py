"""The chargeback of a window (issue 60): who used the fleet's GPU-hours and energy, and what they cost.

``rows`` add up to ``fleet``: one per team, one for jobs without a team, one for idle capacity and one for busy GPUs
nobody reports (``unreported``: jobs that post no throughput and work with no job id). ``jobs`` splits the team
rows job by job. Costs are in ``currency``; a cost that nothing priced is null with its GPU-seconds in
``unpriced_gpu_seconds``, never 0.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class CostEntry(BaseModel):
    """One waterfall category (or energy) of a row: its GPU-seconds and what they cost."""

    category: str
    gpu_seconds: float = Field(description="0 for the energy categories")
    cost: float | None = Field(description="null when none of it is priced")
    unpriced_gpu_seconds: float


class ChargebackRow(BaseModel):
    kind: Literal["fleet", "team", "no_team", "idle", "unreported", "pool"]
    name: str | None = Field(description="the team; null for the other rows")
    gpu_seconds: float
    gpu_hours: float
    cost: float | None = Field(description="GPU-hours and energy priced; null when nothing of it is priced")
    unpriced_gpu_seconds: float = Field(description="GPU-seconds no price covers: the cost leaves them out")
    energy_joules: float
    tokens: float | None = Field(description="tokens processed (training) or output tokens (serving); null: none")
    cost_per_million_tokens: float | None
    joules_per_token: float | None
    categories: list[CostEntry]


class ChargebackJob(BaseModel):
    job_id: str
    kind: str
    team: str | None
    gpu_seconds: float
    gpu_hours: float
    cost: float | None
    unpriced_gpu_seconds: float
    energy_joules: float
    energy_estimated_joules: float = Field(description="the part estimated from power samples, not energy counters")
    tokens: float | None
    requests: float | None = Field(description="requests served (serving jobs)")
    cost_per_million_tokens: float | None
    joules_per_token: float | None
    joules_per_request: float | None


class ChargebackPublic(BaseModel):
    since: float = Field(description="start of the window, rounded down to the hour (Unix seconds)")
    until: float = Field(description="end of the window, rounded up to the hour (Unix seconds)")
    currency: str
    priced: bool = Field(description="a price list is in effect now (GET /v1/prices for its history)")
    fleet: ChargebackRow = Field(description="the whole fleet: the sum of `rows`")
    rows: list[ChargebackRow]
    pools: list[ChargebackRow] = Field(description="the same per pool (kind pool): pools may overlap, so no sum")
    jobs: list[ChargebackJob]
