"""``GET /metrics``: Prometheus exposition of jobs, GPUs, the cluster and the aggregator itself."""

from __future__ import annotations

import gzip
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from mfumon.api.deps import ContextDep, invalid_query
from mfumon.api.metrics._text import CONTENT_TYPE
from mfumon.api.metrics.scrapes import AnswerPacer
from mfumon.api.openapi import invalid_when
from mfumon.api.state.aggregate import summarize

router = APIRouter(tags=["metrics"])

# Level 1: at 10,000 GPUs it shrinks ~10 MB of text 16x in ~20 ms, while level 6 takes 5x longer for 20% less.
_GZIP_LEVEL = 1


class _PacedResponse(Response):
    """A body held, sent in its turn (:class:`~mfumon.api.metrics.scrapes.AnswerPacer`)."""

    def __init__(self, pacer: AnswerPacer, content: bytes, headers: dict[str, str] | None) -> None:
        super().__init__(content=content, media_type=CONTENT_TYPE, headers=headers)
        self._pacer = pacer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self._pacer.turn():
            await super().__call__(scope, receive, send)


MAX_SHARDS = 1024
_SHARDS_RULE = "give both `shard` and `shards`, or neither, with `shard` < `shards`"


@router.get(
    "/metrics",
    response_class=Response,
    responses=invalid_when("only one of `shard` and `shards` is given, or `shard` is not below `shards`."),
)
async def read_metrics(
    request: Request,
    ctx: ContextDep,
    shard: Annotated[
        int | None, Query(ge=0, le=MAX_SHARDS - 1, description=f"this scrape's shard, 0 to shards-1 ({_SHARDS_RULE})")
    ] = None,
    shards: Annotated[
        int | None, Query(ge=1, le=MAX_SHARDS, description=f"how many shards the nodes are split into ({_SHARDS_RULE})")
    ] = None,
) -> Response:
    """Prometheus text format; series of ended jobs and silent nodes are gone. Gzipped when the scraper accepts it.
    A scrape within ``MFUMON_METRICS_MAX_AGE_SECONDS`` of the last render of the same shard gets that body.

    With ``?shard=I&shards=N``: only the node and GPU series of the nodes that hash to shard I (a stable hash of
    the node name), plus, on shard 0 only, every job, pool, team, cluster and self series. N scrape jobs (or N
    Prometheus servers), one per shard, divide the load; together they see exactly the unsharded exposition.
    """
    split = None
    if shard is not None and shards is not None and shard < shards:
        split = (shard, shards)
    elif shard is not None or shards is not None:
        name = "shards" if shard is None else "shard"
        raise invalid_query(name, _SHARDS_RULE, shards if shard is None else shard)
    gzipped = "gzip" in request.headers.get("accept-encoding", "")

    def render() -> bytes:
        snapshot = ctx.state.snapshot(ctx.clock())
        body = ctx.renderer.render(snapshot, summarize(snapshot), split)
        return gzip.compress(body, compresslevel=_GZIP_LEVEL, mtime=0) if gzipped else body

    # Back-to-back scrapes share a render (mfumon.api.metrics.scrapes): a body held is sent in its turn, without a
    # worker thread. A render first renders the nodes stale since their last render on the loop, taking turns with
    # requests, then sums, joins and compresses on a worker thread.
    key = (split, gzipped)
    headers = {"Content-Encoding": "gzip"} if gzipped else None
    body = ctx.scrapes.held(key)
    if body is not None:
        return _PacedResponse(ctx.scrapes.pacer, body, headers)
    await ctx.renderer.catch_up(ctx.state.node, split)
    body = await run_in_threadpool(ctx.scrapes.body, key, render)
    return Response(content=body, media_type=CONTENT_TYPE, headers=headers)
