"""``PUT /v1/scheduler/{source}``: one scheduler adapter's complete view of its jobs and quotas.

A sync is a snapshot, not a delta: jobs of the source that are missing from it have left the scheduler and are
ended. Sending the same snapshot twice changes nothing, and a snapshot older than the last one applied is ignored,
so a second adapter for the same scheduler (a rolling update, an accident) does no harm.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, model_validator

from mfumon.api.schemas._common import (
    CLOCK_SKEW_RULE,
    ID_PATTERN,
    ExitCode,
    Kind,
    Label,
    Number,
    PositiveInt,
    Text,
    Whole,
)

JobId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
NodeName = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Timestamp = Annotated[Number, Field(ge=0, le=1e11)]
State = Annotated[str, Text(32)]
Reason = Annotated[str, Text(64)]
GpuCount = Annotated[int, Whole(0, 10_000_000)]

MAX_JOBS = 500_000
MAX_UNIT_SHAPES = 64
MAX_PLACEMENT_NODES = 100_000
_PLACEMENT_SCHEMA = {  # every key a node name (pydantic's patternProperties alone would leave other keys free)
    "type": "object",
    "maxProperties": MAX_PLACEMENT_NODES,
    "propertyNames": {"pattern": ID_PATTERN},
    "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
}


class SchedulerJob(BaseModel):
    """A job the scheduler holds: pending (queued, held or blocked) or running."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": "A job the scheduler holds: pending (queued, held or blocked) or running. Besides what "
            "the schema states: `units` add up to `gpus_requested`, and `placement` to `gpus_allocated` (422).",
            "anyOf": [  # a pending job holds no GPUs
                {"properties": {"status": {"const": "running"}}},
                {
                    "properties": {
                        "placement": {"anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 0}]},
                        "gpus_allocated": {"anyOf": [{"type": "null"}, {"const": 0}]},
                    }
                },
            ],
        },
    )

    job_id: JobId
    status: Literal["pending", "running"]
    gpus_requested: PositiveInt
    gpus_allocated: GpuCount | None = Field(None, description="running jobs: GPUs the scheduler allocated")
    units: list[tuple[PositiveInt, PositiveInt]] | None = Field(
        None,
        max_length=MAX_UNIT_SHAPES,
        description="[[GPUs per unit, units]]: each unit must fit on one node (a Slurm node, a Kubernetes pod); "
        "absent when the request may spread over nodes freely",
    )
    placement: Annotated[dict[NodeName, PositiveInt], WithJsonSchema(_PLACEMENT_SCHEMA)] | None = Field(
        None, max_length=MAX_PLACEMENT_NODES, description="running jobs: node -> GPUs allocated there"
    )
    submitted_at: Timestamp | None = None
    queued_at: Timestamp | None = Field(
        None, description="when the job became eligible to start; absent while held or waiting on a dependency"
    )
    started_at: Timestamp | None = None
    pending_reason: Reason | None = None
    restarts: Annotated[int, Whole(0, 1_000_000)] = 0
    pool: Label | None = None
    team: Label | None = None
    name: Label | None = None
    kind: Kind | None = None
    gpu_model: Label | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SchedulerJob:
        if self.units is not None and sum(g * n for g, n in self.units) != self.gpus_requested:
            raise ValueError("units must add up to gpus_requested")
        placed = sum(self.placement.values()) if self.placement is not None else None
        if placed is not None and self.gpus_allocated is not None and placed != self.gpus_allocated:
            raise ValueError("placement must add up to gpus_allocated")
        if self.status == "pending" and (self.placement or self.gpus_allocated):
            raise ValueError("a pending job holds no GPUs: drop placement and gpus_allocated")
        return self


class EndedJob(BaseModel):
    """A job the scheduler still lists as finished, with how it ended."""

    model_config = ConfigDict(extra="forbid")

    job_id: JobId
    state: State | None = None
    exit_code: ExitCode | None = None


class TeamQuota(BaseModel):
    """GPUs a team may hold, in one pool or (``pool`` absent) across the source's pools."""

    model_config = ConfigDict(extra="forbid")

    team: Label
    pool: Label | None = None
    gpus: GpuCount


MAX_POOLS = 10_000
_NODES_SCHEMA = {  # node names, each once (a duplicate is a 422, not silently dropped)
    "type": "array",
    "maxItems": MAX_PLACEMENT_NODES,
    "uniqueItems": True,
    "items": {"type": "string", "pattern": ID_PATTERN},
}


class SchedulerPool(BaseModel):
    """A pool as the scheduler defines it (a Slurm partition, a Kubernetes node pool) and the nodes in it."""

    model_config = ConfigDict(extra="forbid")

    name: Label
    nodes: Annotated[list[NodeName], WithJsonSchema(_NODES_SCHEMA)] = Field(
        max_length=MAX_PLACEMENT_NODES,
        description="the pool's nodes, each once; a node may be in several pools (overlapping partitions)",
    )

    @model_validator(mode="after")
    def _unique_nodes(self) -> SchedulerPool:
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("a pool lists each node once")
        return self


class SchedulerSync(BaseModel):
    """The whole body of ``PUT /v1/scheduler/{source}``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "description": "The whole body of `PUT /v1/scheduler/{source}`. Besides what the schema states: each "
            "`jobs[].job_id` once, each quota's (`team`, `pool`) once, each `pools[].name` once, blanks around them "
            "aside (422)."
        },
    )

    kind: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,15}$")] = Field(
        description="scheduler type: slurm, kubernetes, ..."
    )
    observed_at: Timestamp = Field(description="when the adapter read the scheduler. " + CLOCK_SKEW_RULE)
    jobs: list[SchedulerJob] = Field(max_length=MAX_JOBS)
    ended: list[EndedJob] = Field(default_factory=list, max_length=MAX_JOBS)
    quotas: list[TeamQuota] = Field(default_factory=list, max_length=10_000)
    pools: list[SchedulerPool] | None = Field(
        None,
        max_length=MAX_POOLS,
        description="the scheduler's pools and their nodes (Slurm partitions, Kubernetes node pools); pools may "
        "overlap. While this source is fresh, its pools replace exporters' `--pool` for the nodes they list. "
        "Absent: the adapter defines none, and exporters' `--pool` stays the source.",
    )

    @model_validator(mode="after")
    def _unique(self) -> SchedulerSync:
        ids = [job.job_id for job in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique within a sync")
        quota_keys = [(q.team, q.pool) for q in self.quotas]
        if len(set(quota_keys)) != len(quota_keys):
            raise ValueError("one quota per (team, pool)")
        names = [pool.name for pool in self.pools or ()]
        if len(set(names)) != len(names):
            raise ValueError("pool names must be unique within a sync")
        return self


class SyncResult(BaseModel):
    """What a sync changed."""

    source: str
    applied: bool = Field(description="false when the snapshot was older than the last one applied")
    jobs: int
    created: int = 0
    updated: int = 0
    started: int = 0
    requeued: int = 0
    ended: int = 0
    quotas: int = 0


class SourcePublic(BaseModel):
    name: str
    kind: str
    observed_at: float
    synced_at: float
    quotas: list[TeamQuota]
    pools: list[str] | None = Field(
        None, description="names of the pools the scheduler defines (absent: it defines none)"
    )


class SourcesPublic(BaseModel):
    data: list[SourcePublic]
    count: int


__all__ = [
    "EndedJob",
    "SchedulerJob",
    "SchedulerPool",
    "SchedulerSync",
    "SourcePublic",
    "SourcesPublic",
    "SyncResult",
    "TeamQuota",
]
