"""Route dependencies: the process context, and ingest authentication."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.exceptions import RequestValidationError

from api.context import AppContext
from api.middleware import endpoint_of
from api.schemas._common import ID_PATTERN


def get_context(request: Request) -> AppContext:
    return request.app.state.ctx  # type: ignore[no-any-return]


ContextDep = Annotated[AppContext, Depends(get_context)]


def require_ingest_token(request: Request, ctx: ContextDep) -> None:
    """401 unless the request carries a configured bearer token (when tokens are configured)."""
    if not ctx.verifier.verify(request.headers.get("authorization")):
        endpoint = endpoint_of(request.method, request.url.path)
        if endpoint is not None:
            ctx.self_metrics.count_ingest(endpoint, "unauthorized")
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or invalid ingest token (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )


IngestAuth = Depends(require_ingest_token)


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


JobIdPath = Annotated[str, Path(pattern=ID_PATTERN, description="Scheduler job id, at most 128 characters.")]
NodePath = Annotated[str, Path(pattern=ID_PATTERN, description="Node (host) name, at most 128 characters.")]
