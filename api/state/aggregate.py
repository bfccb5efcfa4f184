"""Cluster, pool and team numbers derived from one snapshot.

Definitions (all FLOP/s are dense peaks, see ``api.mfu``):
- a job's *allocated* GPUs are those exporters attribute to it, else the ``num_gpus`` it reports; a pending job
  holds none. Its *requested* GPUs are ``gpus_requested``, else what it runs on.
- cluster MFU = Σ jobs' model FLOP/s ÷ (Σ jobs' peak FLOP/s + Σ bf16 peak of idle known GPUs): idle GPUs count.
- allocated MFU = Σ jobs' model FLOP/s ÷ Σ jobs' peak FLOP/s: how well the GPUs in use are used.
- pool MFU adds the pool's idle GPUs to the denominator; team MFU covers the team's jobs only.
- resource satisfaction = Σ allocated ÷ Σ requested over the pool's running and pending jobs.
Jobs whose MFU is unknown (no peak for their device) are left out of both numerator and denominator.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.state.store import Snapshot
from api.state.views import JobView


@dataclass(slots=True)
class GroupTotals:
    model_flops_per_second: float = 0.0
    peak_flops_per_second: float = 0.0  # jobs' peaks only
    idle_peak_flops_per_second: float = 0.0
    gpus_allocated: int = 0
    gpus_requested: int = 0
    gpus_idle: int = 0
    jobs_running: int = 0
    jobs_pending: int = 0

    @property
    def mfu(self) -> float | None:
        denominator = self.peak_flops_per_second + self.idle_peak_flops_per_second
        return self.model_flops_per_second / denominator if denominator > 0 else None

    @property
    def allocated_mfu(self) -> float | None:
        if self.peak_flops_per_second <= 0:
            return None
        return self.model_flops_per_second / self.peak_flops_per_second

    @property
    def resource_satisfaction(self) -> float | None:
        return self.gpus_allocated / self.gpus_requested if self.gpus_requested > 0 else None


@dataclass(slots=True)
class Summary:
    cluster: GroupTotals
    pools: dict[str, GroupTotals]
    teams: dict[str, GroupTotals]
    allocated: dict[str, int]  # job_id -> GPUs allocated
    gpus_known: int = 0
    gpus_down: int = 0
    gpus_unknown_model: int = 0
    nodes: int = 0


def _requested(job: JobView, allocated: int) -> int:
    return job.gpus_requested or job.num_gpus or allocated


def summarize(snapshot: Snapshot) -> Summary:
    """Derive every cluster-level number from one snapshot in O(nodes + jobs)."""
    running = {j.job_id for j in snapshot.jobs if j.status == "running"}
    attributed: dict[str, int] = {}
    job_node_pool: dict[str, str] = {}
    cluster = GroupTotals()
    pools: dict[str, GroupTotals] = {}
    teams: dict[str, GroupTotals] = {}
    summary = Summary(cluster=cluster, pools=pools, teams=teams, allocated={})

    for node in snapshot.nodes:
        summary.nodes += 1
        summary.gpus_known += len(node.gpus)
        summary.gpus_down += node.gpus_down
        summary.gpus_unknown_model += node.gpus_unknown_model
        pool = pools.setdefault(node.pool, GroupTotals()) if node.pool else None
        for job_id, share in node.shares.items():
            if job_id is not None and job_id in running:
                attributed[job_id] = attributed.get(job_id, 0) + share.count
                if node.pool:
                    job_node_pool.setdefault(job_id, node.pool)
                continue
            for group in (cluster, pool):
                if group is not None:
                    group.gpus_idle += share.count
                    group.idle_peak_flops_per_second += share.bf16_peak_flops

    for job in snapshot.jobs:
        pool_name = job.pool or job_node_pool.get(job.job_id)
        groups = [cluster]
        if pool_name:
            groups.append(pools.setdefault(pool_name, GroupTotals()))
        if job.team:
            groups.append(teams.setdefault(job.team, GroupTotals()))
        if job.status == "pending":
            summary.allocated[job.job_id] = 0
            for group in groups:
                group.jobs_pending += 1
                group.gpus_requested += _requested(job, 0)
            continue
        allocated = attributed.get(job.job_id) or job.num_gpus or 0
        summary.allocated[job.job_id] = allocated
        latest = job.latest or {}
        has_mfu = latest.get("mfu") is not None
        for group in groups:
            group.jobs_running += 1
            group.gpus_allocated += allocated
            group.gpus_requested += _requested(job, allocated)
            if has_mfu:
                group.model_flops_per_second += latest["model_flops_per_second"]
                group.peak_flops_per_second += latest["peak_flops_per_second"]
    return summary
