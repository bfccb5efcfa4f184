"""Node routes: exporters push samples; readers list nodes and their GPUs."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from api.deps import ContextDep, IngestAuth, NodePath
from api.schemas.nodes import GpuPublic, NodePublic, NodeSampleCreate, NodesPublic, SampleAccepted
from api.services.samples import record_sample
from api.state.views import NodeView

router = APIRouter(prefix="/v1/nodes", tags=["nodes"])


def _public(node: NodeView) -> NodePublic:
    return NodePublic(
        name=node.name,
        pool=node.pool,
        last_seen_at=node.last_seen_at,
        last_timestamp=node.last_sample_timestamp,
        samples_received=node.samples_received,
        gpus=[
            GpuPublic(
                uuid=g.uuid,
                node=g.node,
                index=g.index,
                name=g.name,
                device=g.device,
                mig_profile=g.mig_profile,
                job_id=g.job_id,
                up=g.up,
                counters=g.counters,
                sample_timestamp=g.sample_timestamp,
            )
            for g in node.gpus
        ],
    )


@router.post("/{node}/samples", response_model=SampleAccepted, dependencies=[IngestAuth])
def create_sample(node: NodePath, body: NodeSampleCreate, ctx: ContextDep) -> SampleAccepted:
    """Push one collection cycle of a node's GPUs."""
    applied = record_sample(ctx, node, body)
    ctx.self_metrics.count_ingest("node_samples", "accepted")
    return SampleAccepted(accepted=len(body.gpus), applied=applied)


@router.get("", response_model=NodesPublic)
def read_nodes(ctx: ContextDep) -> NodesPublic:
    """Nodes that pushed within the node TTL, with their GPUs."""
    nodes = sorted(ctx.state.snapshot(ctx.clock()).nodes, key=lambda n: n.name)
    return NodesPublic(data=[_public(n) for n in nodes], count=len(nodes))


@router.get("/{node}", response_model=NodePublic)
def read_node(node: NodePath, ctx: ContextDep) -> NodePublic:
    """One node and its GPUs' latest counters."""
    view = ctx.state.node(node)
    if view is None:
        raise HTTPException(status_code=404, detail=f"node {node!r} not found (or silent past the node TTL)")
    return _public(view)
