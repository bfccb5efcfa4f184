"""One engine per process, and the session dependency for routes."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


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
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True, json_serializer=_strict_json)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
