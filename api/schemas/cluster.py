"""Cluster summary response body."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GroupSummary(BaseModel):
    """MFU and GPU counts of a pool (its nodes' GPUs) or team (its jobs' GPUs)."""

    name: str
    mfu: float | None
    model_flops_per_second: float
    estimated_flops_per_second: float = Field(description="the part of model_flops_per_second estimated from hardware")
    peak_flops_per_second: float
    reported_coverage: float | None = Field(description="GPUs in reporting jobs / busy GPUs")
    gpus_reporting: int
    gpus_unreported: int
    gpus_idle: int
    gpus_down: int
    gpus_allocated: int = Field(description="GPUs exporters attribute to the group's jobs")
    gpus_requested: int
    jobs_running: int
    jobs_pending: int
    resource_satisfaction: float | None


class ClusterSummary(BaseModel):
    """The cluster as exporters and job reports describe it (README, "Where each number comes from").

    ``gpus_reporting + gpus_unreported + gpus_idle + gpus_down == gpus_known``, the GPUs exporters report.
    """

    mfu: float | None
    allocated_mfu: float | None
    model_flops_per_second: float
    estimated_flops_per_second: float = Field(description="the part of model_flops_per_second estimated from hardware")
    peak_flops_per_second: float
    allocated_peak_flops_per_second: float
    reported_coverage: float | None = Field(description="GPUs in reporting jobs / busy GPUs")
    gpus_known: int
    gpus_reporting: int
    gpus_unreported: int
    gpus_idle: int
    gpus_down: int
    gpus_allocated: int = Field(description="GPUs exporters attribute to registered jobs")
    gpus_unverified: int = Field(description="GPUs job reports claim that no exporter confirms; in no state")
    jobs_gpu_mismatch: int = Field(description="reporting jobs whose num_gpus differs from their attributed GPUs")
    gpus_unknown_model: int
    nodes: int
    jobs_running: int
    jobs_pending: int
    pools: list[GroupSummary]
    teams: list[GroupSummary]
