"""Cluster summary response body."""

from __future__ import annotations

from pydantic import BaseModel


class GroupSummary(BaseModel):
    """MFU and GPU counts of a pool or team."""

    name: str
    mfu: float | None
    model_flops_per_second: float
    peak_flops_per_second: float
    gpus_allocated: int
    gpus_requested: int
    gpus_idle: int
    jobs_running: int
    jobs_pending: int
    resource_satisfaction: float | None


class ClusterSummary(BaseModel):
    mfu: float | None
    allocated_mfu: float | None
    model_flops_per_second: float
    peak_flops_per_second: float
    allocated_peak_flops_per_second: float
    gpus_known: int
    gpus_allocated: int
    gpus_idle: int
    gpus_down: int
    gpus_unknown_model: int
    nodes: int
    jobs_running: int
    jobs_pending: int
    pools: list[GroupSummary]
    teams: list[GroupSummary]
