"""Node pushes: the one service that validates, authorises and applies a push, whoever took it.

Three callers, one function (:func:`ingest_push`): the declared route (:func:`mfumon.api.routes.nodes.create_sample`,
with the body FastAPI validated and the principal its dependency authorised), the fast door ahead of the app's
middleware, and the door of ``mfumon serve``'s protocol, which takes a push in the callback that read it
(:mod:`mfumon.api.server.fast_door`). The doors answer only what needs no error: a push this declines (a body that
does not validate, a token without the ``nodes`` scope) goes on to the route, which answers it with FastAPI's errors.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import HTTPException, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from mfumon.api.context import AppContext
from mfumon.api.core.security import granted
from mfumon.api.route_table import NODE_SAMPLES
from mfumon.api.schemas._common import ID_PATTERN
from mfumon.api.schemas.nodes import NodeSampleCreate, decode_push
from mfumon.api.services.samples import record_sample

NODE_NAME = re.compile(ID_PATTERN)
"""The node names the route's path parameter accepts, for code that checks a name without FastAPI."""
SCOPE = "nodes"
"""The token scope a push needs."""


def parse_push(body: bytes) -> NodeSampleCreate | None:
    """A push body validated in one pass (:func:`decode_push`), or None for FastAPI's handler and its errors."""
    try:
        return decode_push(body)
    except ValidationError:
        return None


def ingest_push(
    ctx: AppContext,
    state: dict[str, Any],
    authorization: str | None,
    node: str,
    body: bytes,
    sample: NodeSampleCreate | None = None,
    raising: Exception | None = None,
) -> bytes | None:
    """Validate, authorise and apply one push to ``node``: the answer's JSON body, or None when it is declined (its
    body does not validate, or its token lacks the ``nodes`` scope) for the route to answer with its error.

    ``body``: the push's bytes (kept as received); ``sample``: the push already validated from them (the route's),
    else they are validated here. ``state``: the request's state, whose ``principal`` admission or the route's
    dependency kept there, else the token of ``authorization`` (anonymous while tokens are off), kept there for the
    write audit. ``raising``: an error taking this same push already raised (in the server's protocol), raised again
    in place of applying it twice. Raises what the app's exception handlers answer: a timestamp from the future, a
    capacity limit, a backlog."""
    if sample is None:
        sample = parse_push(body)
        if sample is None:
            return None
    if granted(state, authorization, ctx.verifier, SCOPE) is None:
        return None
    if raising is not None:
        raise raising
    reject_future_timestamp(ctx, sample.timestamp)
    check_node_capacity(ctx, node, len(sample.gpus))
    applied = record_sample(ctx, node, sample, body)
    ctx.self_metrics.count_ingest(NODE_SAMPLES, "accepted")
    # Written here rather than validated against the response model (which still documents it): two fields.
    return f'{{"accepted":{len(sample.gpus)},"applied":{"true" if applied else "false"}}}'.encode()


LIMITED_RETRY_AFTER_S = 60


def limited(ctx: AppContext, endpoint: str, limit: str, message: str) -> HTTPException:
    """429 at a cardinality limit: counted by limit, and retried later by exporters and reporters (Retry-After)."""
    ctx.self_metrics.count_refused(limit)
    ctx.self_metrics.count_ingest(endpoint, "limited")
    return HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, message, {"Retry-After": str(LIMITED_RETRY_AFTER_S)})


def check_node_capacity(ctx: AppContext, node: str, gpus: int) -> None:
    """GPUs per push (422 naming ``gpus``), then nodes and GPUs in all (429): the bounds on node and GPU series."""
    settings = ctx.settings
    if gpus > settings.MAX_GPUS_PER_NODE:
        ctx.self_metrics.count_refused("gpus_per_node")
        message = f"at most {settings.MAX_GPUS_PER_NODE} GPUs per node (MFUMON_MAX_GPUS_PER_NODE), got {gpus}"
        raise RequestValidationError([{"type": "too_long", "loc": ("body", "gpus"), "msg": message, "input": gpus}])
    held = ctx.state.node(node)
    nodes, gpus_held, _ = ctx.state.sizes()
    if held is None and nodes >= settings.MAX_NODES:
        raise limited(ctx, NODE_SAMPLES, "nodes", f"the aggregator holds {nodes} nodes (MFUMON_MAX_NODES)")
    if gpus_held - (len(held.gpus) if held is not None else 0) + gpus > settings.MAX_GPUS:
        raise limited(ctx, NODE_SAMPLES, "gpus", f"the aggregator holds {gpus_held} GPUs (MFUMON_MAX_GPUS)")


def reject_future_timestamp(ctx: AppContext, timestamp: float, field: str = "timestamp") -> None:
    """422 naming ``field`` for a client timestamp further ahead of this server's clock than the allowed skew.

    A sample from the future would otherwise outrank every real one that follows it.
    """
    skew = ctx.settings.MAX_CLOCK_SKEW_SECONDS
    ahead = timestamp - ctx.clock()
    if ahead > skew:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("body", field),
                    "msg": f"{field} is {ahead:.0f} s ahead of the aggregator's clock (at most {skew:g} s allowed, "
                    "MFUMON_MAX_CLOCK_SKEW_SECONDS): check the sender's clock (NTP)",
                    "input": timestamp,
                }
            ]
        )
