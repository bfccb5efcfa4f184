"""Queue, quota and fragmentation numbers per pool and team, derived from one snapshot.

Definitions:
- a node's *free* GPUs are its GPUs that answer (``up``) minus those held by running jobs: the larger of what
  exporters attribute to running jobs and what the scheduler placed there, so a GPU the scheduler gave a job that
  has not started computing yet is not free;
- a *queued* job is pending and competing for GPUs: a scheduler job that is held or waiting on a dependency is
  pending but not queued (it has no ``queued_at``) and counts neither as requested nor as waiting;
- queue wait of a queued job = now - when it became eligible (scheduler jobs only);
- a pool's nodes are those :mod:`mfumon.api.state.pools` gives it: a node in two of the scheduler's pools (overlapping
  partitions) has its free GPUs in both, so free GPUs summed over pools count a shared node twice;
- a pool's *largest free block* is the most free GPUs on one of its nodes: the largest one-node request it can
  place now;
- *fragmented* GPUs: GPUs requested by queued jobs that cannot be placed whole (each unit of the request on one
  node, units placed largest first on the node with the most free GPUs) although the pool has at least that many
  free GPUs in total. Jobs whose request may spread freely (no units) are never fragmented;
- quota use = GPUs held by the team's running jobs in the quota's pool (all pools when the quota names none) /
  the quota.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import JobView


@dataclass(slots=True)
class PoolCapacity:
    free_per_node: list[int] = field(default_factory=list)
    gpus_per_node_max: int = 0
    fragmented_gpus: int = 0
    gpus_queued: int = 0
    jobs_queued: int = 0
    max_queue_wait_seconds: float | None = None

    @property
    def free_gpus(self) -> int:
        return sum(self.free_per_node)

    @property
    def largest_free_block(self) -> int:
        return max(self.free_per_node, default=0)

    def nodes_by_free(self) -> dict[int, int]:
        """Nodes per count of free GPUs, every count from 0 to the largest node (stable series)."""
        counts = dict.fromkeys(range(self.gpus_per_node_max + 1), 0)
        for free in self.free_per_node:
            counts[free] = counts.get(free, 0) + 1
        return counts


@dataclass(slots=True)
class TeamQueue:
    gpus_queued: int = 0
    jobs_queued: int = 0
    max_queue_wait_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Quota:
    team: str
    pool: str | None
    gpus: int
    used: int
    source: str

    @property
    def used_ratio(self) -> float | None:
        return self.used / self.gpus if self.gpus > 0 else None


@dataclass(slots=True)
class Capacity:
    pools: dict[str, PoolCapacity]
    teams: dict[str, TeamQueue]
    quotas: list[Quota]
    queue_waits: dict[str, float]  # job_id -> seconds, queued scheduler jobs


def placeable(units: tuple[tuple[int, int], ...], free_per_node: list[int]) -> bool:
    """Can every unit (GPUs that must share one node) be placed? Largest first, each on the node with most free."""
    heap = [-free for free in free_per_node if free > 0]
    heapq.heapify(heap)
    for gpus, count in sorted(units, reverse=True):
        for _ in range(count):
            if not heap or -heap[0] < gpus:
                return False
            left = -heapq.heappop(heap) - gpus
            if left > 0:
                heapq.heappush(heap, -left)
    return True


def _later(current: float | None, value: float) -> float:
    return value if current is None else max(current, value)


def capacity(snapshot: Snapshot, allocated: Mapping[str, int]) -> Capacity:
    """Every queue, quota and fragmentation number, in O(nodes + jobs + queued units)."""
    running = [j for j in snapshot.jobs if j.status == "running"]
    running_ids = {j.job_id for j in running}
    placed: dict[str, int] = {}
    for job in running:
        for node_name, gpus in (job.placement or {}).items():
            placed[node_name] = placed.get(node_name, 0) + gpus

    pools: dict[str, PoolCapacity] = {name: PoolCapacity() for name in snapshot.pools.listed}
    for node in snapshot.nodes:
        node_pools = snapshot.pools.of(node)  # a node in two of the scheduler's pools is free in both
        if not node_pools:
            continue
        up = len(node.gpus) - node.gpus_down
        busy = sum(share.count for job_id, share in node.shares.items() if job_id in running_ids)
        busy += sum(1 for sharing in node.shared if not running_ids.isdisjoint(sharing))  # a shared GPU once
        free = max(0, up - max(busy, placed.get(node.name, 0)))
        for name in node_pools:
            pool = pools.setdefault(name, PoolCapacity())
            pool.free_per_node.append(free)
            pool.gpus_per_node_max = max(pool.gpus_per_node_max, len(node.gpus))

    free_total = {name: pool.free_gpus for name, pool in pools.items()}
    teams: dict[str, TeamQueue] = {}
    waits: dict[str, float] = {}
    for job in snapshot.jobs:
        if not job.queued:
            continue
        wait = snapshot.now - job.queued_at if job.queued_at is not None else None
        if wait is not None:
            waits[job.job_id] = max(0.0, wait)
        requested = job.gpus_requested or job.num_gpus or 0
        groups: list[PoolCapacity | TeamQueue] = []
        if job.pool:
            groups.append(pools.setdefault(job.pool, PoolCapacity()))
        if job.team:
            groups.append(teams.setdefault(job.team, TeamQueue()))
        for group in groups:
            group.gpus_queued += requested
            group.jobs_queued += 1
            if wait is not None:
                group.max_queue_wait_seconds = _later(group.max_queue_wait_seconds, max(0.0, wait))
        target = pools.get(job.pool) if job.pool else None
        if target is None or not job.request_units or requested > free_total.get(job.pool or "", 0):
            continue
        if not placeable(job.request_units, target.free_per_node):
            target.fragmented_gpus += requested

    quotas = _quotas(snapshot, running, allocated)
    return Capacity(pools=pools, teams=teams, quotas=quotas, queue_waits=waits)


def _quotas(snapshot: Snapshot, running: list[JobView], allocated: Mapping[str, int]) -> list[Quota]:
    used: dict[tuple[str, str | None], int] = {}
    for job in running:
        if job.team:
            held = allocated.get(job.job_id, 0)
            used[(job.team, job.pool)] = used.get((job.team, job.pool), 0) + held
            used[(job.team, None)] = used.get((job.team, None), 0) + held
    out = []
    for source in sorted(snapshot.sources, key=lambda s: s.name):
        for team, pool, gpus in source.quotas:
            out.append(Quota(team=team, pool=pool, gpus=gpus, used=used.get((team, pool), 0), source=source.name))
    return out
