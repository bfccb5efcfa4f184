"""INSERT ... ON CONFLICT DO UPDATE for the two dialects we support."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def upsert_rows(
    session: Session,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    key: Sequence[str],
    update: Sequence[str],
) -> None:
    """Insert ``rows``; where ``key`` exists, replace the ``update`` columns (or keep the row when none)."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(table)
    if update:
        stmt = stmt.on_conflict_do_update(
            index_elements=list(key), set_={c: stmt.excluded[c] for c in update}
        )
    else:
        stmt = stmt.on_conflict_do_nothing(index_elements=list(key))
    session.execute(stmt, list(rows))
