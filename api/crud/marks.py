"""Billing marks: how far a periodic, cluster-wide billing has got. Every replica runs the billing; the one that
moves the mark (under its row lock) bills the interval, so each interval is billed exactly once."""

from __future__ import annotations

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from mfumon.api.crud._upsert import insert_if_absent
from mfumon.api.db.tables import BillingMarkRow


def claim_interval(session: Session, *, name: str, now: float, max_seconds: float) -> tuple[float, float] | None:
    """Move mark ``name`` to ``now`` and return the interval ``(start, now)`` to bill, at most ``max_seconds`` long;
    None when there is nothing to bill (the mark is new, or another replica has just moved it to ``now`` or later).

    The mark's row stays locked until the caller's transaction ends, so a replica claiming at the same time waits,
    then sees the moved mark.
    """
    marks: Table = BillingMarkRow.__table__  # type: ignore[assignment]
    insert_if_absent(session, marks, {"name": name, "until": now}, key=["name"])
    until = session.execute(select(marks.c.until).where(marks.c.name == name).with_for_update()).scalar_one()
    if until >= now:
        return None
    session.execute(update(marks).where(marks.c.name == name).values(until=now))
    return max(until, now - max_seconds), now
