"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from sqlalchemy import text

from mfumon.api.deps import ContextDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def read_health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def read_ready(ctx: ContextDep) -> dict[str, str]:
    """The state is loaded, follows the other replicas' changes, and the database answers."""
    if not ctx.ready():
        raise HTTPException(status_code=503, detail="not following other replicas' changes (reconnecting)")
    try:
        with ctx.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"database unavailable: {type(exc).__name__}") from exc
    return {"status": "ready"}
