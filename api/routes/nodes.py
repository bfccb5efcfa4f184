"""Node routes: exporters push samples; readers list nodes and their GPUs."""

from __future__ import annotations

from collections.abc import Container
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response

from mfumon.api.deps import ContextDep, NodePath, NodeWriter, PageDep
from mfumon.api.route_table import NODE_SAMPLES, route_spec
from mfumon.api.routes._one_pass import OnePassJSONRoute
from mfumon.api.schemas.nodes import (
    GpuPublic,
    HealthReason,
    NodeHealthPublic,
    NodePublic,
    NodeSampleCreate,
    NodesPublic,
    SampleAccepted,
)
from mfumon.api.services.ingest import ingest_push
from mfumon.api.state.aggregate import gpu_state, node_gpu_states, reporting_jobs
from mfumon.api.state.software import software_json
from mfumon.api.state.views import NodeView

JSON = "application/json"

router = APIRouter(prefix="/v1/nodes", tags=["nodes"], route_class=OnePassJSONRoute)


def _health(node: NodeView) -> NodeHealthPublic | None:
    if node.health is None:
        return None
    return NodeHealthPublic(
        healthy=node.health.healthy,
        drain=node.health.drain,
        reasons=[HealthReason(**reason) for reason in node.health.reasons],
        checks=dict(node.health.node_checks),
    )


def _public(node: NodeView, reporting: Container[str]) -> NodePublic:
    return NodePublic(
        name=node.name,
        pool=node.pool,
        last_seen_at=node.last_seen_at,
        last_timestamp=node.last_sample_timestamp,
        samples_received=node.samples_received,
        gpu_states=node_gpu_states(node, reporting),
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
                state=gpu_state(g, reporting),
                hardware_mfu=g.hardware_mfu,
                hardware_estimate_source=g.hardware_estimate_source,
                counters=g.counters,
                sample_timestamp=g.sample_timestamp,
                health=node.health.gpu_checks.get(g.uuid) if node.health else None,
            )
            for g in node.gpus
        ],
        ib_ports=None if node.ib_ports is None else [p.as_json() for p in node.ib_ports],
        health=_health(node),
        software=software_json(node.software),
    )


@router.post("/{node}/samples", response_model=SampleAccepted)
@route_spec("nodes", endpoint=NODE_SAMPLES)
async def create_sample(node: NodePath, body: NodeSampleCreate, request: Request, _: NodeWriter) -> Response:
    """Push one collection cycle of a node's GPUs; stored within SAMPLE_FLUSH_SECONDS (see mfumon.api.services.samples).

    Runs on the event loop: it touches only memory, so it needs no thread. The token is checked first (a
    dependency), then the body, then what needs this server's clock and state. Well-formed pushes, nearly all of
    them, are answered by :class:`mfumon.api.server.fast_door.FastDoor` ahead of the middleware, through
    :func:`mfumon.api.services.ingest.ingest_push` as here.
    """
    state = request.scope.setdefault("state", {})
    answer = ingest_push(request.app.state.ctx, state, None, node, await request.body(), body)
    assert answer is not None  # validated by FastAPI and authorised by the dependency: never declined
    return Response(answer, media_type=JSON)


@router.get("", response_model=NodesPublic)
def read_nodes(
    ctx: ContextDep,
    page: PageDep,
    unhealthy: Annotated[bool, Query(description="only nodes failing a health check (GPU or node)")] = False,
    drain: Annotated[bool, Query(description="only the drain list: nodes failing a check that needs a drain")] = False,
) -> NodesPublic:
    """Nodes that pushed within the node TTL, with their GPUs, in name order a page at a time; ``unhealthy=true``
    lists failing ones, with reasons."""
    snapshot = ctx.state.snapshot(ctx.clock())
    reporting = reporting_jobs(snapshot)
    nodes = sorted((n for n in snapshot.nodes if page.after is None or n.name > page.after), key=lambda n: n.name)
    if unhealthy:
        nodes = [n for n in nodes if n.health is not None and not n.health.healthy]
    if drain:
        nodes = [n for n in nodes if n.health is not None and n.health.drain]
    nodes = nodes[: page.limit]
    next_cursor = page.next_cursor([n.name for n in nodes])
    return NodesPublic(data=[_public(n, reporting) for n in nodes], count=len(nodes), next_cursor=next_cursor)


@router.get("/{node}", response_model=NodePublic)
def read_node(node: NodePath, ctx: ContextDep) -> NodePublic:
    """One node and its GPUs' latest counters."""
    view = ctx.state.node(node)
    if view is None:
        raise HTTPException(status_code=404, detail=f"node {node!r} not found (or silent past the node TTL)")
    return _public(view, reporting_jobs(ctx.state.snapshot(ctx.clock())))
