"""The node agent with the NCCL Inspector in its cycle: each collection also reads the dump directory.

The batch is kept on the agent (:attr:`InspectingAgent.inspector_batch`) and folded into running totals per job,
process group and collective (:mod:`~mfumon.exporter.node.nccl_inspector.totals`) that the node push carries as
``collectives``, and per rank over the interval (:mod:`~mfumon.exporter.node.nccl_inspector.ranks`) as
``collective_ranks``. A failing read costs the inspector figures of that cycle, never the GPU samples (counted as a
collector error, as a failing port reader is).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

from mfumon.exporter.node.nccl_inspector.ranks import rank_collectives
from mfumon.exporter.node.nccl_inspector.source import InspectorBatch, InspectorSource
from mfumon.exporter.node.nccl_inspector.totals import RunningTotals
from mfumon.exporter.node.pipeline import Agent
from mfumon.exporter.samples import GpuSample, NodeBatch

__all__ = ["GpuJobs", "InspectingAgent"]

logger = logging.getLogger(__name__)


class GpuJobs:
    """The job on each GPU as the last collection attributed it: how the textfiles, which name a GPU and no pid,
    reach their job. Thread-safe: the collector writes it, the inspector reads it in the same cycle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, str | None] = {}

    def update(self, gpus: tuple[GpuSample, ...] | list[GpuSample]) -> None:
        jobs = {gpu.uuid.lower(): gpu.job_id for gpu in gpus}
        with self._lock:
            self._jobs = jobs

    def __call__(self, uuid: str) -> str | None:
        with self._lock:
            return self._jobs.get(uuid.lower())


class InspectingAgent(Agent):
    """:class:`~mfumon.exporter.node.pipeline.Agent` that also collects an :class:`InspectorSource` every cycle."""

    def __init__(self, *, inspector: InspectorSource | None, gpu_jobs: GpuJobs | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.inspector = inspector
        self.gpu_jobs = gpu_jobs
        self.inspector_batch: InspectorBatch | None = None
        self.totals = RunningTotals()
        self.ranks_refused = 0  # per-rank rows the aggregator would refuse, left out of pushes (since start)
        self.ranks_dropped = 0  # ... and rows past the push's bound

    def _extend(self, batch: NodeBatch) -> NodeBatch:
        """Read the dump directory in this cycle and push the running totals and the interval's per-rank figures
        with the GPU samples."""
        if self.inspector is None:
            return batch
        if self.gpu_jobs is not None:
            self.gpu_jobs.update(batch.gpus)
        try:
            self.inspector_batch = self.inspector.collect(batch.timestamp)
            collectives = self.totals.add(self.inspector_batch)
            ranks = rank_collectives(self.inspector_batch)
        except Exception as exc:  # the inspector must not cost the cycle
            self.metrics.collector_errors.inc()
            logger.warning("reading NCCL Inspector output from %s failed: %s", self.inspector.directory, exc)
            return batch
        self.ranks_refused += ranks.refused
        self.ranks_dropped += ranks.dropped
        if not collectives and not ranks.rows:
            return batch
        return replace(batch, collectives=collectives or None, collective_ranks=ranks.rows or None)
