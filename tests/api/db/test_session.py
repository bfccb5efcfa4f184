"""The engines a process opens (mfumon.api.db.session): on SQLite the sample writer has a connection of its own, with a
page cache that holds the node table, and every connection checkpoints the write-ahead log less often than SQLite's
default; on PostgreSQL the writer shares the pool."""

from __future__ import annotations

import json
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, func, select

from mfumon.api.crud.nodes import read_nodes
from mfumon.api.db.migrate import upgrade_to_head
from mfumon.api.db.session import (
    SQLITE_WAL_AUTOCHECKPOINT_PAGES,
    SQLITE_WRITER_CACHE_KIB,
    make_engine,
    make_sessionmaker,
    make_writer_engine,
)
from mfumon.api.db.tables import NodeRow
from mfumon.api.services.samples import SampleWriter
from tests.utils.factories import node_sample

SQLITE_DEFAULT_CACHE = -2000  # SQLite's own: 2,000 KiB


def _pragma(engine: Engine, name: str) -> int:
    with engine.connect() as connection:
        return int(connection.exec_driver_sql(f"PRAGMA {name}").scalar_one())


def test_the_sample_writer_stores_through_a_connection_of_its_own_on_sqlite(database_url: str) -> None:
    upgrade_to_head(database_url)
    shared = make_engine(database_url)
    writer_engine = make_writer_engine(database_url, shared)
    try:
        if shared.dialect.name != "sqlite":
            assert writer_engine is None  # PostgreSQL does a flush's work in its server: the writer shares the pool
            return
        assert writer_engine is not None and writer_engine is not shared
        assert _pragma(writer_engine, "cache_size") == -SQLITE_WRITER_CACHE_KIB
        assert _pragma(shared, "cache_size") == SQLITE_DEFAULT_CACHE  # the pool's connections keep SQLite's
        assert _pragma(writer_engine, "wal_autocheckpoint") == SQLITE_WAL_AUTOCHECKPOINT_PAGES
        assert _pragma(shared, "wal_autocheckpoint") == SQLITE_WAL_AUTOCHECKPOINT_PAGES

        checkouts: list[object] = []
        event.listen(writer_engine, "checkout", lambda *args: checkouts.append(args))
        writer = SampleWriter(make_sessionmaker(writer_engine), interval_seconds=60)
        for n in range(3):
            writer.queue(f"node-{n}", "p", json.dumps(node_sample(2)), 100.0 + n, 100.0 + n)
        assert writer.flush() == 3
        assert checkouts  # the flush went through the writer's engine
        with make_sessionmaker(shared)() as session:  # committed: visible to every other connection at once
            assert sorted(row.name for row in read_nodes(session=session)) == ["node-0", "node-1", "node-2"]
            assert session.scalar(select(func.sum(NodeRow.samples_received))) == 3
        assert writer_engine.pool.checkedout() == 0  # and gave its connection back
    finally:
        shared.dispose()
        if writer_engine is not None:
            writer_engine.dispose()


def test_serve_hands_the_sample_writer_its_own_engine_on_sqlite_only(make_client: Callable[..., TestClient]) -> None:
    """What ``create_app`` wires, not what the test above builds: the writer's sessions on SQLite open connections
    with the writer's page cache; on PostgreSQL they are the pool's own."""
    ctx = make_client().app.state.ctx  # type: ignore[attr-defined]
    writer_bind, pool_bind = ctx.sample_writer.sessions.kw["bind"], ctx.sessions.kw["bind"]
    if pool_bind.dialect.name != "sqlite":
        assert writer_bind is pool_bind
        return
    assert writer_bind is not pool_bind
    assert _pragma(writer_bind, "cache_size") == -SQLITE_WRITER_CACHE_KIB
    assert _pragma(pool_bind, "cache_size") == SQLITE_DEFAULT_CACHE
