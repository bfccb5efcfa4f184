"""INSERT ... ON CONFLICT for the two dialects we support, built once per (table, dialect, columns)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


@functools.cache
def _upsert_statement(table: Table, dialect: str, key: tuple[str, ...], update: tuple[str, ...]) -> Any:
    """The statement object is reused, so SQLAlchemy's compiled cache hits and the hot path builds nothing."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(table)
    if update:
        return stmt.on_conflict_do_update(index_elements=list(key), set_={c: stmt.excluded[c] for c in update})
    return stmt.on_conflict_do_nothing(index_elements=list(key))


def insert_if_absent(session: Session, table: Table, row: dict[str, Any], *, key: Sequence[str]) -> bool:
    """Insert ``row`` unless a row with its ``key`` exists (even one inserted concurrently); True if inserted."""
    dialect = session.get_bind().dialect.name
    stmt = _upsert_statement(table, dialect, tuple(key), ()).returning(*(table.c[k] for k in key))
    return session.execute(stmt, row).first() is not None  # rowcount is -1 here with psycopg 3


def upsert_rows(
    session: Session, table: Table, rows: Sequence[dict[str, Any]], *, key: Sequence[str], update: Sequence[str]
) -> None:
    """Insert ``rows``; where ``key`` exists, replace the ``update`` columns (or keep the row when none)."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    session.execute(_upsert_statement(table, dialect, tuple(key), tuple(update)), list(rows))


def lock_for_write(session: Session) -> None:
    """Make sure a read-modify-write holds SQLite's write lock (PostgreSQL's SELECT ... FOR UPDATE does the rest).

    Every ``sessions.begin()`` transaction already starts with ``BEGIN IMMEDIATE`` on SQLite (mfumon.api.db.session), so
    this only acts on a transaction begun some other way.
    """
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        return
    dbapi_connection = connection.connection.dbapi_connection
    if dbapi_connection is not None and not dbapi_connection.in_transaction:  # type: ignore[attr-defined]
        connection.exec_driver_sql("BEGIN IMMEDIATE")
