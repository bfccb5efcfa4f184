"""Remediation audit rows (``mfumon remediate``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from mfumon.api.db.tables import RemediationRow

#: Outcomes that repeat every round while they hold: stored once, with ``repeats`` counting the rounds.
REPEATING_OUTCOMES = frozenset({"dry_run", "withheld"})
#: A repeat further apart than this from the row's last one starts a new row (a new episode).
REPEAT_WINDOW_SECONDS = 3600.0


def add_remediation(*, session: Session, row: RemediationRow) -> RemediationRow:
    """Store ``row``; a dry-run or withheld decision that repeats the node's latest one of the same kind within
    :data:`REPEAT_WINDOW_SECONDS` updates that row instead (locked, so concurrent repeats add up)."""
    if row.outcome in REPEATING_OUTCOMES:
        held = session.scalars(
            select(RemediationRow)
            .where(
                RemediationRow.node == row.node,
                RemediationRow.action == row.action,
                RemediationRow.reason == row.reason,
                RemediationRow.outcome == row.outcome,
                RemediationRow.last_at >= row.last_at - REPEAT_WINDOW_SECONDS,
            )
            .order_by(RemediationRow.last_at.desc())
            .limit(1)
            .with_for_update()
        ).first()
        if held is not None:
            held.repeats += 1
            held.last_at = max(held.last_at, row.last_at)
            held.detail, held.actor, held.recorded_by = row.detail, row.actor, row.recorded_by
            held.pools, held.checks = row.pools, row.checks
            return held
    session.add(row)
    session.flush()
    return row


def read_remediations(
    *,
    session: Session,
    limit: int,
    node: str | None = None,
    outcome: str | None = None,
    action: str | None = None,
    since: float | None = None,
) -> Sequence[RemediationRow]:
    """Newest first (by ``last_at``), filtered."""
    stmt = select(RemediationRow).order_by(RemediationRow.last_at.desc(), RemediationRow.id.desc()).limit(limit)
    if node is not None:
        stmt = stmt.where(RemediationRow.node == node)
    if outcome is not None:
        stmt = stmt.where(RemediationRow.outcome == outcome)
    if action is not None:
        stmt = stmt.where(RemediationRow.action == action)
    if since is not None:
        stmt = stmt.where(RemediationRow.last_at >= since)
    return session.scalars(stmt).all()


def read_resumes(*, session: Session, nodes: Sequence[str], after: float) -> Sequence[tuple[str, float]]:
    """(node, when) of the done resumes and uncordons of ``nodes`` from ``after`` on, oldest first."""
    if not nodes:
        return []
    stmt = (
        select(RemediationRow.node, RemediationRow.first_at)
        .where(
            RemediationRow.node.in_(list(nodes)),
            RemediationRow.outcome == "done",
            RemediationRow.action.in_(("resume", "uncordon")),
            RemediationRow.first_at >= after,
        )
        .order_by(RemediationRow.first_at)
    )
    return [(str(node), float(at)) for node, at in session.execute(stmt).all()]


def open_drain(*, session: Session, node: str, at: float) -> RemediationRow | None:
    """The node's latest done drain or cordon at or before ``at`` that no done resume or uncordon closed since."""
    drain = session.scalars(
        select(RemediationRow)
        .where(
            RemediationRow.node == node,
            RemediationRow.outcome == "done",
            RemediationRow.action.in_(("drain", "cordon")),
            RemediationRow.first_at <= at,
        )
        .order_by(RemediationRow.first_at.desc(), RemediationRow.id.desc())
        .limit(1)
    ).first()
    if drain is None:
        return None
    closed = session.scalars(
        select(RemediationRow.id)
        .where(
            RemediationRow.node == node,
            RemediationRow.outcome == "done",
            RemediationRow.action.in_(("resume", "uncordon")),
            RemediationRow.first_at >= drain.first_at,
            RemediationRow.first_at <= at,
        )
        .limit(1)
    ).first()
    return None if closed is not None else drain
