"""The remediation audit, end to end: store a decision of ``mfumon remediate`` and count it durably
(``mfumon_remediation_actions_total{action,reason,outcome}``, in the same transaction), or read them back."""

from __future__ import annotations

from collections.abc import Sequence

from mfumon.api.context import AppContext
from mfumon.api.core.security import ANONYMOUS, Principal
from mfumon.api.crud import remediations as crud
from mfumon.api.crud.counters import Increments, add_to_counters, shard_of
from mfumon.api.db.tables import RemediationRow
from mfumon.api.metrics._text import labels_text
from mfumon.api.schemas.remediations import RemediationCreate, RemediationPublic

ACTIONS_TOTAL = "mfumon_remediation_actions_total"


def _public(row: RemediationRow) -> RemediationPublic:
    return RemediationPublic.model_validate(row, from_attributes=True)


def record_remediation(ctx: AppContext, body: RemediationCreate, principal: Principal = ANONYMOUS) -> RemediationPublic:
    """Store one decision (a repeat of a dry-run or withheld one updates its row) and count it."""
    now = ctx.clock()
    increments = Increments()
    labels = labels_text([("action", body.action), ("reason", body.reason), ("outcome", body.outcome)])
    increments[(ACTIONS_TOTAL, labels)] += 1
    with ctx.sessions.begin() as session:
        row = crud.add_remediation(
            session=session,
            row=RemediationRow(
                node=body.node,
                scheduler=body.scheduler,
                action=body.action,
                reason=body.reason,
                outcome=body.outcome,
                checks=list(body.checks),
                pools=list(body.pools),
                detail=body.detail,
                actor=body.actor,
                recorded_by=principal.name,
                attempts=body.attempts,
                first_at=body.timestamp,
                last_at=body.timestamp,
                repeats=1,
            ),
        )
        rows = add_to_counters(session, increments, shard=shard_of(body.node), now=now)
        public = _public(row)
    ctx.state.counters.apply(rows)
    return public


def read_remediations(
    ctx: AppContext,
    *,
    limit: int,
    node: str | None = None,
    outcome: str | None = None,
    action: str | None = None,
    since: float | None = None,
) -> Sequence[RemediationPublic]:
    """Decisions newest first, filtered."""
    with ctx.sessions() as session:
        rows = crud.read_remediations(
            session=session, limit=limit, node=node, outcome=outcome, action=action, since=since
        )
        return [_public(row) for row in rows]
