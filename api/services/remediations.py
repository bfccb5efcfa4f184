"""The remediation audit, end to end: store a decision of ``mfumon remediate`` and count it durably
(``mfumon_remediation_actions_total{action,reason,outcome}`` and, per node,
``mfumon_node_remediation_decisions_total{node,action,reason,outcome}``, and the GPU-seconds its drains took and
the jobs lost before them, ``mfumon_remediation_gpu_seconds_total{category}``, in the same transaction), or read
them back."""

from __future__ import annotations

from collections.abc import Sequence

from mfumon.api.context import AppContext
from mfumon.api.core.security import ANONYMOUS, Principal
from mfumon.api.crud import remediations as crud
from mfumon.api.crud.counters import Increments, add_to_counters, shard_of
from mfumon.api.db.tables import RemediationRow
from mfumon.api.metrics._text import labels_text
from mfumon.api.schemas.remediations import RemediationCreate, RemediationPublic
from mfumon.api.services import remediation_cost as cost

ACTIONS_TOTAL = "mfumon_remediation_actions_total"
GPU_SECONDS_TOTAL = "mfumon_remediation_gpu_seconds_total"  # drained / lost_before_drain (remediation_cost)
NODE_DECISIONS_TOTAL = "mfumon_node_remediation_decisions_total"  # the same, per node: what MfumonNodeDrain joins


def _public(row: RemediationRow, *, resumed: float | None = None, now: float | None = None) -> RemediationPublic:
    public = RemediationPublic.model_validate(row, from_attributes=True)
    public.resumed_at = resumed
    public.jobs_gpu_hours_before_drain = cost.jobs_gpu_hours_before_drain(row)
    public.drained_gpu_hours = cost.drained_gpu_hours(row, resumed, row.first_at if now is None else now)
    return public


def record_remediation(ctx: AppContext, body: RemediationCreate, principal: Principal = ANONYMOUS) -> RemediationPublic:
    """Store one decision (a repeat of a dry-run or withheld one updates its row) and count it."""
    now = ctx.clock()
    increments = Increments()
    decision = [("action", body.action), ("reason", body.reason), ("outcome", body.outcome)]
    increments[(ACTIONS_TOTAL, labels_text(decision))] += 1
    increments[(NODE_DECISIONS_TOTAL, labels_text([("node", body.node), *decision]))] += 1
    gpus, gpus_busy = cost.node_gpus(ctx.state.node(body.node)) if body.action in cost.OUT_ACTIONS else (None, None)
    with ctx.sessions.begin() as session:
        if body.action in cost.BACK_ACTIONS and body.outcome == "done":  # before this row, which closes the drain
            drain = crud.open_drain(session=session, node=body.node, at=body.timestamp)
            drained = cost.drained_gpu_hours(drain, body.timestamp, body.timestamp) if drain is not None else None
            if drained:
                increments[(GPU_SECONDS_TOTAL, labels_text([("category", "drained")]))] += drained * cost.HOUR
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
                failing_since=body.failing_since if body.action in cost.OUT_ACTIONS else None,
                gpus=gpus,
                gpus_busy=gpus_busy,
            ),
        )
        lost = cost.jobs_gpu_hours_before_drain(row) if row.outcome == "done" and row.repeats == 1 else None
        if lost:
            increments[(GPU_SECONDS_TOTAL, labels_text([("category", "lost_before_drain")]))] += lost * cost.HOUR
        rows = add_to_counters(session, increments, shard=shard_of(body.node), now=now)
        public = _public(row, now=now)
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
    """Decisions newest first, filtered; a drain with what it cost and saved in GPU-hours
    (:mod:`mfumon.api.services.remediation_cost`)."""
    now = ctx.clock()
    with ctx.sessions() as session:
        rows = crud.read_remediations(
            session=session, limit=limit, node=node, outcome=outcome, action=action, since=since
        )
        drains = [r for r in rows if r.action in cost.OUT_ACTIONS and r.outcome == "done"]
        resumes = crud.read_resumes(
            session=session,
            nodes=sorted({r.node for r in drains}),
            after=min((r.first_at for r in drains), default=now),
        )
        resumed = cost.resumed_at(drains, resumes)
        return [_public(row, resumed=resumed.get(row.id), now=now) for row in rows]
