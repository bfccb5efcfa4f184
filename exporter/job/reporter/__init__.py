"""Job-side reporting: a training or inference process tells the aggregator how fast it runs.

Imports nothing beyond the standard library (and `mfumon.exporter.job.models`), so it is safe in any training image.
"""

from __future__ import annotations

from mfumon.exporter.job.models import ModelSpec, describe_model
from mfumon.exporter.job.reporter._client import DeliveryStats
from mfumon.exporter.job.reporter._core import JobReporter
from mfumon.exporter.job.reporter._env import default_job_id, default_rank, default_world_size

__all__ = [
    "DeliveryStats",
    "JobReporter",
    "ModelSpec",
    "default_job_id",
    "default_rank",
    "default_world_size",
    "describe_model",
]
