"""The price lists' rows: the newest is in effect; every one is kept (what a past hour cost, and who changed it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mfumon.api.db.tables import PriceListRow


def latest_price_list(session: Session) -> PriceListRow | None:
    return session.scalars(select(PriceListRow).order_by(PriceListRow.id.desc()).limit(1)).first()


def price_lists(session: Session, *, limit: int = 100) -> list[PriceListRow]:
    """The newest ``limit`` price lists, newest first."""
    return list(session.scalars(select(PriceListRow).order_by(PriceListRow.id.desc()).limit(limit)))


def add_price_list(session: Session, document: dict[str, Any], *, set_by: str, now: float) -> PriceListRow:
    row = PriceListRow(set_at=now, set_by=set_by, document=document)
    session.add(row)
    session.flush()
    return row
