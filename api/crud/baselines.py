"""Baseline rows. Every write is one statement that the database decides on the row (``INSERT ... ON CONFLICT DO
UPDATE ... WHERE``, ``UPDATE ... WHERE``), so concurrent captures, pins and resets from any replica serialize on the
row, and a capture can never overwrite a pin that committed first.

A reset keeps the row with ``mfu`` null (a tombstone): replicas learn of it through ``updated_at`` like any change.
``version`` grows by one with every write, so a process applying rows out of order keeps the newest.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, false, func, or_, select, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mfumon.api.db.tables import BaselineRow

# Columns a capture or a pin replaces on an existing row (the rest describe the signature and never change).
_MEASURED = ("mfu", "tokens_per_second_per_gpu", "num_gpus", "source_job_id", "captured_at", "updated_at")


def read_baseline(*, session: Session, signature: str, include_reset: bool = False) -> BaselineRow | None:
    row = session.get(BaselineRow, signature, populate_existing=True)
    if row is None or (row.mfu is None and not include_reset):
        return None
    return row


def read_baselines(
    *, session: Session, limit: int, after: str | None, pinned: bool | None = None, include_reset: bool = False
) -> list[BaselineRow]:
    """Baselines in signature order after ``after`` (a cursor)."""
    stmt = select(BaselineRow).order_by(BaselineRow.signature).limit(limit)
    if after is not None:
        stmt = stmt.where(BaselineRow.signature > after)
    if not include_reset:
        stmt = stmt.where(BaselineRow.mfu.is_not(None))
    if pinned is not None:
        stmt = stmt.where(BaselineRow.pinned == (true() if pinned else false()))
    return list(session.scalars(stmt))


def _insert(session: Session, row: dict[str, Any]) -> Any:
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    return insert(BaselineRow).values(row)


def capture(*, session: Session, row: dict[str, Any], raise_margin: float, window_min: float) -> BaselineRow | None:
    """Store an automatic capture: a new signature, a reset one, or an unpinned baseline that every value of the
    capturing window beats by ``raise_margin``. Returns the stored row, or None when the row was not replaced."""
    stmt = _insert(session, {**row, "captures": 1, "pinned": False, "version": 1})
    replaceable = or_(
        BaselineRow.mfu.is_(None),
        and_(BaselineRow.pinned == false(), BaselineRow.mfu * (1.0 + raise_margin) <= window_min),
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["signature"],
        set_={
            **{c: stmt.excluded[c] for c in _MEASURED},
            "captures": BaselineRow.captures + 1,
            "previous_mfu": func.coalesce(BaselineRow.mfu, BaselineRow.previous_mfu),
            "version": BaselineRow.version + 1,
        },
        where=replaceable,
    ).returning(BaselineRow)
    return session.scalars(stmt, execution_options={"populate_existing": True}).one_or_none()


def pin(*, session: Session, row: dict[str, Any]) -> BaselineRow:
    """Store a pinned baseline, replacing whatever the signature held (the last pin to commit wins)."""
    stmt = _insert(session, {**row, "captures": 0, "pinned": True, "version": 1})
    stmt = stmt.on_conflict_do_update(
        index_elements=["signature"],
        set_={
            **{c: stmt.excluded[c] for c in (*_MEASURED, "pinned", "pinned_by", "pinned_at", "note")},
            "previous_mfu": func.coalesce(BaselineRow.mfu, BaselineRow.previous_mfu),
            "version": BaselineRow.version + 1,
        },
    ).returning(BaselineRow)
    return session.scalars(stmt, execution_options={"populate_existing": True}).one()


def pin_current(*, session: Session, signature: str, values: dict[str, Any]) -> BaselineRow | None:
    """Pin the value a signature holds now (``values``: pinned_by, pinned_at, note, updated_at); None if it holds
    none."""
    stmt = (
        update(BaselineRow)
        .where(BaselineRow.signature == signature, BaselineRow.mfu.is_not(None))
        .values(pinned=True, version=BaselineRow.version + 1, **values)
        .returning(BaselineRow)
    )
    return session.scalars(stmt, execution_options={"populate_existing": True}).one_or_none()


def reset(*, session: Session, signature: str, reset_by: str, now: float) -> BaselineRow | None:
    """Forget a signature's baseline (pinned or not); None if it holds none."""
    stmt = (
        update(BaselineRow)
        .where(BaselineRow.signature == signature, BaselineRow.mfu.is_not(None))
        .values(
            mfu=None,
            previous_mfu=BaselineRow.mfu,
            tokens_per_second_per_gpu=None,
            pinned=False,
            pinned_by=None,
            pinned_at=None,
            note=None,
            reset_by=reset_by,
            reset_at=now,
            updated_at=now,
            version=BaselineRow.version + 1,
        )
        .returning(BaselineRow)
    )
    return session.scalars(stmt, execution_options={"populate_existing": True}).one_or_none()
