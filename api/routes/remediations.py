"""Remediation audit routes: ``mfumon remediate`` records each decision; anyone with read access lists them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from mfumon.api.deps import ID_PATTERN, ContextDep, RemediationWriter, reject_future_timestamp
from mfumon.api.route_table import route_spec
from mfumon.api.schemas.remediations import (
    RemediationAction,
    RemediationCreate,
    RemediationOutcome,
    RemediationPublic,
    RemediationsPublic,
)
from mfumon.api.services import remediations as service

router = APIRouter(prefix="/v1/remediations", tags=["remediations"])


@router.post("", response_model=RemediationPublic)
@route_spec("remediate", endpoint="remediations")
def create_remediation(body: RemediationCreate, ctx: ContextDep, principal: RemediationWriter) -> RemediationPublic:
    """Record one decision of ``mfumon remediate``: an action done or failed, a dry run, or one withheld by a rail."""
    reject_future_timestamp(ctx, body.timestamp)
    result = service.record_remediation(ctx, body, principal)
    ctx.self_metrics.count_ingest("remediations", "accepted")
    return result


@router.get("", response_model=RemediationsPublic)
def read_remediations(
    ctx: ContextDep,
    limit: Annotated[int, Query(ge=1, le=1000, description="Records, newest first; at most 1000.")] = 100,
    node: Annotated[str | None, Query(pattern=ID_PATTERN, description="Only this node's.")] = None,
    outcome: Annotated[RemediationOutcome | None, Query(description="Only this outcome.")] = None,
    action: Annotated[RemediationAction | None, Query(description="Only this action.")] = None,
    since: Annotated[float | None, Query(ge=0, lt=1e11, description="Unix seconds: last decided at or after.")] = None,
) -> RemediationsPublic:
    """Drains, resumes, cordons and dry runs of ``mfumon remediate``, and the actions its rails withheld, with
    reasons, newest first."""
    data = service.read_remediations(ctx, limit=limit, node=node, outcome=outcome, action=action, since=since)
    return RemediationsPublic(data=list(data), count=len(data))
