"""Node routes: exporters push samples; readers list nodes and their GPUs."""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response

from mfumon.api.context import AppContext
from mfumon.api.deps import (
    NODE_NAME,
    ContextDep,
    NodePath,
    NodeWriter,
    PageDep,
    authorized,
    check_node_capacity,
    reject_future_timestamp,
)
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
from mfumon.api.services.samples import record_sample
from mfumon.api.state.aggregate import gpu_state, node_gpu_states, reporting_jobs
from mfumon.api.state.views import NodeView

JSON = "application/json"
PUSH_PATH = re.compile(r"/v1/nodes/([^/]+)/samples")
"""The node push's path, its group the node (as the route's ``{node}`` matches it): for the fast path."""

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
                counters=g.counters,
                sample_timestamp=g.sample_timestamp,
                health=node.health.gpu_checks.get(g.uuid) if node.health else None,
            )
            for g in node.gpus
        ],
        ib_ports=None if node.ib_ports is None else [p.as_json() for p in node.ib_ports],
        health=_health(node),
    )


async def well_formed_push(request: Request) -> Response | None:
    """:func:`create_sample` for a push that needs no error: a JSON body with a Content-Length that validates, a
    valid node name, a token with the ``nodes`` scope. Anything else is None, for FastAPI's handler and its errors.
    Offered every push ahead of the app's inner middleware and routing (``mfumon.api.routes._one_pass.FastPath``,
    installed by ``mfumon.api.main``): about a fifth of a push's CPU otherwise (``bench/ingest_inprocess.py``).
    """
    headers = request.headers
    node = request.path_params.get("node")
    if headers.get("content-type") != JSON or "content-length" not in headers or not isinstance(node, str):
        return None
    ctx: AppContext = request.app.state.ctx
    if NODE_NAME.fullmatch(node) is None or authorized(request, ctx, "nodes") is None:
        return None
    try:
        body = await request.json()
    except Exception:  # invalid JSON, a body that timed out: FastAPI's handler reads it again and answers
        return None
    return await _accept(ctx, node, body, request) if isinstance(body, NodeSampleCreate) else None


@router.post("/{node}/samples", response_model=SampleAccepted)
async def create_sample(node: NodePath, body: NodeSampleCreate, request: Request, _: NodeWriter) -> Response:
    """Push one collection cycle of a node's GPUs; stored within SAMPLE_FLUSH_SECONDS (see mfumon.api.services.samples).

    Runs on the event loop: it touches only memory, so it needs no thread. The token is checked first (a
    dependency), then the body, then what needs this server's clock and state. Well-formed pushes, nearly all of
    them, are answered by :func:`well_formed_push` before they get here, to the same end.
    """
    return await _accept(request.app.state.ctx, node, body, request)


async def _accept(ctx: AppContext, node: str, body: NodeSampleCreate, request: Request) -> Response:
    reject_future_timestamp(ctx, body.timestamp)
    check_node_capacity(ctx, node, len(body.gpus))
    applied = record_sample(ctx, node, body, await request.body())  # the body read and validated before
    ctx.self_metrics.count_ingest("node_samples", "accepted")
    # Written here rather than validated against the response model (which still documents it): two fields.
    return Response(f'{{"accepted":{len(body.gpus)},"applied":{"true" if applied else "false"}}}', media_type=JSON)


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
