"""Stable import path of the job reporter; the code lives in :mod:`exporter.job.reporter`."""

from __future__ import annotations

from exporter.job.reporter import (
    DeliveryStats,
    JobReporter,
    ModelSpec,
    default_job_id,
    default_rank,
    default_world_size,
    describe_model,
)

__all__ = [
    "DeliveryStats",
    "JobReporter",
    "ModelSpec",
    "default_job_id",
    "default_rank",
    "default_world_size",
    "describe_model",
]
