"""``GET /metrics``: Prometheus exposition of jobs, GPUs, the cluster and the aggregator itself."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import ContextDep
from api.metrics._text import CONTENT_TYPE
from api.state.aggregate import summarize

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response)
def read_metrics(ctx: ContextDep) -> Response:
    """Prometheus text format; series of ended jobs and silent nodes are gone."""
    snapshot = ctx.state.snapshot(ctx.clock())
    body = ctx.renderer.render(snapshot, summarize(snapshot))
    return Response(content=body, media_type=CONTENT_TYPE)
