"""One engine per process, and its sessions: ``with ctx.sessions.begin()`` writes, ``with ctx.sessions()`` reads.

On PostgreSQL, writers serialise on row locks (``SELECT ... FOR UPDATE``, after ``INSERT ... ON CONFLICT DO
NOTHING`` has made sure the row exists). SQLite has no row locks, so there a transaction opened with
``Session.begin()`` starts with ``BEGIN IMMEDIATE``: it takes the database's write lock before it reads anything,
and concurrent writers queue on the busy timeout instead of failing (a deferred transaction that read first and
writes later gets SQLITE_BUSY at once if another writer came in between) or losing an update. Reads, which open
their transaction implicitly, stay deferred and never wait for writers (WAL).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.orm import Session, SessionTransaction, sessionmaker

from mfumon.api.db import arrays

_WRITE = "mfumon_write"  # execution option of a connection procured by Session.begin()


class _Session(Session):
    def begin(self, nested: bool = False) -> SessionTransaction:
        transaction = super().begin(nested)
        if not nested and self.get_bind().dialect.name == "sqlite":
            self.connection(execution_options={_WRITE: True})  # procured now, so it begins IMMEDIATE
        return transaction


def _strict_json(value: Any) -> str:
    """JSON columns refuse NaN and infinities on every database, as PostgreSQL does (SQLite would store them)."""
    return json.dumps(value, allow_nan=False)


def make_engine(url: str) -> Engine:
    """Create the engine; SQLite gets WAL and foreign keys so it behaves like the production database."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, json_serializer=_strict_json
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # the driver emits no BEGIN of its own: _sqlite_begin does
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

        return engine
    engine = create_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True, json_serializer=_strict_json)
    if engine.dialect.driver == "psycopg":
        event.listen(engine, "connect", lambda dbapi_conn, _record: arrays.register(dbapi_conn))
    return engine


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, class_=_Session, expire_on_commit=False)
