"""Cluster summary route: the same numbers ``/metrics`` shows, as JSON."""

from __future__ import annotations

from fastapi import APIRouter

from mfumon.api.deps import ContextDep
from mfumon.api.schemas.cluster import ClusterSummary, GroupSummary
from mfumon.api.state.aggregate import GroupTotals, summarize

router = APIRouter(prefix="/v1/cluster", tags=["cluster"])


def _group(name: str, group: GroupTotals, *, team: bool = False) -> GroupSummary:
    return GroupSummary(
        name=name,
        mfu=group.allocated_mfu if team else group.mfu,
        model_flops_per_second=group.model_flops_per_second,
        estimated_flops_per_second=group.estimated_flops_per_second,
        peak_flops_per_second=group.peak_flops_per_second + group.idle_peak_flops_per_second,
        reported_coverage=group.reported_coverage,
        gpus_reporting=group.gpus_reporting,
        gpus_unreported=group.gpus_unreported,
        gpus_idle=group.gpus_idle,
        gpus_down=group.gpus_down,
        gpus_allocated=group.gpus_allocated,
        gpus_requested=group.gpus_requested,
        jobs_running=group.jobs_running,
        jobs_pending=group.jobs_pending,
        resource_satisfaction=group.resource_satisfaction,
    )


@router.get("", response_model=ClusterSummary)
def read_cluster(ctx: ContextDep) -> ClusterSummary:
    """Cluster MFU (idle GPUs count), allocated MFU, GPUs by state and source, and the same per pool and team."""
    snapshot = ctx.state.snapshot(ctx.clock())
    summary = summarize(snapshot)
    cluster = summary.cluster
    return ClusterSummary(
        mfu=cluster.mfu,
        allocated_mfu=cluster.allocated_mfu,
        model_flops_per_second=cluster.model_flops_per_second,
        estimated_flops_per_second=cluster.estimated_flops_per_second,
        peak_flops_per_second=cluster.peak_flops_per_second + cluster.idle_peak_flops_per_second,
        allocated_peak_flops_per_second=cluster.peak_flops_per_second,
        reported_coverage=cluster.reported_coverage,
        gpus_known=summary.gpus_known,
        gpus_reporting=cluster.gpus_reporting,
        gpus_unreported=cluster.gpus_unreported,
        gpus_idle=cluster.gpus_idle,
        gpus_down=cluster.gpus_down,
        gpus_allocated=cluster.gpus_allocated,
        gpus_unverified=summary.gpus_unverified,
        jobs_gpu_mismatch=summary.jobs_gpu_mismatch,
        gpus_unknown_model=summary.gpus_unknown_model,
        nodes=summary.nodes,
        jobs_running=cluster.jobs_running,
        jobs_pending=cluster.jobs_pending,
        pools=[_group(n, g) for n, g in sorted(summary.pools.items())],
        teams=[_group(n, g, team=True) for n, g in sorted(summary.teams.items())],
    )
