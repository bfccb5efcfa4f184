"""On-demand profiles on the job side: run ``torch.profiler`` for a few steps, keep the trace, send a summary.

:mod:`._summary` reduces a Kineto trace to a `TraceSummary` (pure; standard library only); :mod:`._capture` runs the
profiler on the ranks a request names, without blocking or raising into the training step.
"""

from __future__ import annotations

from mfumon.exporter.job.profile._agent import MAX_STEPS, ProfileAgent
from mfumon.exporter.job.profile._request import ProfileRequest, sample_ranks
from mfumon.exporter.job.profile._summary import (
    CollectiveTime,
    GroupTime,
    KernelTime,
    StepTime,
    TraceSummary,
    summarize_trace,
)
from mfumon.exporter.job.profile._trace import load_trace
from mfumon.exporter.parallelism import GROUPS, group_of

__all__ = [
    "GROUPS",
    "MAX_STEPS",
    "CollectiveTime",
    "GroupTime",
    "KernelTime",
    "ProfileAgent",
    "ProfileRequest",
    "StepTime",
    "TraceSummary",
    "group_of",
    "load_trace",
    "sample_ranks",
    "summarize_trace",
]
