"""In-memory views of nodes, GPUs and jobs: what ``/metrics`` and the cluster summary read.

Each view is immutable once built; an update replaces the whole view, so a scrape never sees half a write and
renderers can cache by identity of ``revision``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class GpuView:
    uuid: str
    node: str
    index: int
    name: str
    mig_profile: str | None
    job_id: str | None
    up: bool
    counters: dict[str, Any]
    sample_timestamp: float
    device: str | None  # peak-table key, None when the device is unknown
    bf16_peak_flops: float | None  # dense bf16 peak of this device (MIG slice scaled), for idle-capacity sums


@dataclass(frozen=True, slots=True)
class JobShare:
    """The GPUs one job holds on one node."""

    count: int
    gpu_name: str
    mig_profile: str | None
    bf16_peak_flops: float  # sum over those GPUs; 0 for unknown devices


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    pool: str | None
    last_seen_at: float
    last_sample_timestamp: float
    samples_received: int
    updated_at: float
    gpus: tuple[GpuView, ...]
    # Precomputed when the view is built, so cluster sums cost O(nodes), not O(GPUs), per scrape.
    shares: dict[str | None, JobShare] = field(default_factory=dict)  # job_id (None = unattributed) -> share
    gpus_down: int = 0
    gpus_unknown_model: int = 0

    @property
    def revision(self) -> tuple[float, float]:
        return (self.updated_at, self.last_seen_at)


def build_node_view(
    *,
    name: str,
    pool: str | None,
    last_seen_at: float,
    last_sample_timestamp: float,
    samples_received: int,
    updated_at: float,
    gpus: tuple[GpuView, ...],
) -> NodeView:
    """Build a node view and its per-job GPU shares (down GPUs hold no share)."""
    counts: dict[str | None, list[Any]] = {}
    down = unknown = 0
    for gpu in gpus:
        if not gpu.up:
            down += 1
            continue
        if gpu.bf16_peak_flops is None:
            unknown += 1
        entry = counts.setdefault(gpu.job_id, [0, gpu.name, gpu.mig_profile, 0.0])
        entry[0] += 1
        entry[3] += gpu.bf16_peak_flops or 0.0
    shares = {job: JobShare(c, n, m, p) for job, (c, n, m, p) in counts.items()}
    return NodeView(
        name=name,
        pool=pool,
        last_seen_at=last_seen_at,
        last_sample_timestamp=last_sample_timestamp,
        samples_received=samples_received,
        updated_at=updated_at,
        gpus=gpus,
        shares=shares,
        gpus_down=down,
        gpus_unknown_model=unknown,
    )


@dataclass(frozen=True, slots=True)
class JobView:
    job_id: str
    status: str  # pending | running | ended
    kind: str
    name: str | None
    team: str | None
    pool: str | None
    gpu_model: str | None
    dtype: str
    num_gpus: int | None
    gpus_requested: int | None
    model_key: str | None
    created_at: float
    started_at: float | None
    last_report_at: float | None
    ended_at: float | None
    latest: dict[str, Any] | None
    updated_at: float


@dataclass(frozen=True, slots=True)
class BaselineView:
    signature: str
    mfu: float
    updated_at: float
