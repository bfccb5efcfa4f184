"""The snapshot a scheduler adapter puts to ``PUT /v1/scheduler/{source}``: jobs, finished jobs, quotas and pools.

Field meanings are the aggregator's (``api/schemas/scheduler.py``); this side only builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["EndedJob", "Pool", "Quota", "ScheduledJob", "Snapshot"]


@dataclass(slots=True)
class ScheduledJob:
    """A pending or running job that asked for GPUs."""

    job_id: str
    status: Literal["pending", "running"]
    gpus_requested: int
    units: list[tuple[int, int]] | None = None  # [(GPUs per unit, units)]: each unit on one node; None: may spread
    gpus_allocated: int | None = None
    placement: dict[str, int] | None = None  # node -> GPUs (running)
    submitted_at: float | None = None
    queued_at: float | None = None  # eligible to start; None while held or blocked
    started_at: float | None = None
    pending_reason: str | None = None
    restarts: int = 0
    pool: str | None = None
    team: str | None = None
    name: str | None = None

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "job_id": self.job_id,
            "status": self.status,
            "gpus_requested": self.gpus_requested,
            "restarts": self.restarts,
        }
        optional = {
            "units": [list(u) for u in self.units] if self.units else None,
            "gpus_allocated": self.gpus_allocated if self.status == "running" else None,
            "placement": self.placement if self.status == "running" and self.placement else None,
            "submitted_at": self.submitted_at,
            "queued_at": self.queued_at,
            "started_at": self.started_at if self.status == "running" else None,
            "pending_reason": self.pending_reason[:64] if self.pending_reason and self.status == "pending" else None,
            "pool": self.pool[:128] if self.pool else None,
            "team": self.team[:128] if self.team else None,
            "name": self.name[:128] if self.name and self.name.strip() else None,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        return body


@dataclass(frozen=True, slots=True)
class EndedJob:
    """A job the scheduler still shows as finished: how it ended."""

    job_id: str
    state: str | None = None
    exit_code: int | None = None

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"job_id": self.job_id}
        if self.state:
            body["state"] = self.state[:32]
        if self.exit_code is not None and -1024 <= self.exit_code <= 1024:
            body["exit_code"] = self.exit_code
        return body


@dataclass(frozen=True, slots=True)
class Quota:
    team: str
    gpus: int
    pool: str | None = None

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"team": self.team, "gpus": self.gpus}
        if self.pool:
            body["pool"] = self.pool
        return body


@dataclass(frozen=True, slots=True)
class Pool:
    """A pool as the scheduler defines it (a Slurm partition, a Kubernetes node pool) and its nodes, by name."""

    name: str
    nodes: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name[:128], "nodes": sorted(set(self.nodes))}


@dataclass(slots=True)
class Snapshot:
    """Everything one read of the scheduler found."""

    kind: str
    observed_at: float
    jobs: list[ScheduledJob] = field(default_factory=list)
    ended: list[EndedJob] = field(default_factory=list)
    quotas: list[Quota] = field(default_factory=list)
    pools: list[Pool] | None = None  # None: this adapter leaves pools to exporters' --pool

    def as_json(self) -> dict[str, Any]:
        listed = {job.job_id for job in self.jobs}
        body: dict[str, Any] = {
            "kind": self.kind,
            "observed_at": self.observed_at,
            "jobs": [job.as_json() for job in self.jobs],
            "ended": [job.as_json() for job in self.ended if job.job_id not in listed],
            "quotas": [quota.as_json() for quota in self.quotas],
        }
        if self.pools is not None:
            body["pools"] = [pool.as_json() for pool in sorted(self.pools, key=lambda p: p.name)]
        return body
