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


#: Pages SQLite writes to its write-ahead log before it copies them into the database (a checkpoint, in the
#: connection whose commit crossed it; SQLite's default is 1,000). A flush of a large cluster's samples writes a
#: page per node: at 1,000 a 12,500-node cluster checkpointed in every flush. At 10,000 (a log of up to 40 MB) it
#: checkpoints every few flushes, copies a page written again meanwhile once, and a flush costs 15-20% less CPU
#: (``bench/sqlite_flush.py``).
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 10_000

#: The sample writer's page cache on SQLite, at most (SQLite's default is 2 MB): a node's row is a page (its sample,
#: 3-4 KB at 8 GPUs), so this holds the node table of about 25,000 nodes and a flush reads none of it back from
#: the file. Taken only as pages are touched.
SQLITE_WRITER_CACHE_KIB = 128 * 1024


def make_engine(url: str, *, cache_kib: int | None = None, connections: int | None = None) -> Engine:
    """Create the engine; SQLite gets WAL and foreign keys so it behaves like the production database.

    ``cache_kib``: SQLite's page cache per connection (default: SQLite's); ``connections``: a pool of exactly that
    many (default: SQLAlchemy's, or 10 and 10 more on PostgreSQL)."""
    pool: dict[str, Any] = {} if connections is None else {"pool_size": connections, "max_overflow": 0}
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, json_serializer=_strict_json, **pool
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # the driver emits no BEGIN of its own: _sqlite_begin does
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
            if cache_kib is not None:
                cursor.execute(f"PRAGMA cache_size=-{cache_kib}")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

        return engine
    engine = create_engine(
        url, pool_pre_ping=True, json_serializer=_strict_json, **(pool or {"pool_size": 10, "max_overflow": 10})
    )
    if engine.dialect.driver == "psycopg":
        event.listen(engine, "connect", lambda dbapi_conn, _record: arrays.register(dbapi_conn))
    return engine


def make_writer_engine(url: str, shared: Engine) -> Engine | None:
    """The sample writer's own engine, or None where it shares ``shared``.

    On SQLite, one connection with a page cache that holds the node table (:data:`SQLITE_WRITER_CACHE_KIB`): with
    SQLite's 2 MB, each row a flush updated was read back from the file first. A flush of 3,000 of 12,500 nodes
    (100,000 GPUs) cost 17-20% less CPU per node with the cache, a third less with the checkpoint above too
    (``bench/sqlite_flush.py``). The writer is one thread, so one connection; the pool's connections, which mostly
    read, keep SQLite's default cache each. On PostgreSQL the work is the server's: the writer shares ``shared``.
    """
    if shared.dialect.name != "sqlite":
        return None
    return make_engine(url, cache_kib=SQLITE_WRITER_CACHE_KIB, connections=1)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, class_=_Session, expire_on_commit=False)
