"""The node rows' group commit (mfumon.api.crud.nodes.upsert_nodes) on both databases: many nodes in one flush."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import psycopg
from sqlalchemy import event, func, select

from mfumon.api.crud.nodes import NodeWrite, upsert_nodes
from mfumon.api.db.migrate import upgrade_to_head
from mfumon.api.db.session import make_engine, make_sessionmaker
from mfumon.api.db.tables import NodeRow
from mfumon.migrations.change_triggers import CHANNEL
from tests.utils.factories import node_sample


def test_a_flush_of_many_nodes_stores_all_and_tells_replicas_in_a_few_notifications(database_url: str) -> None:
    upgrade_to_head(database_url)
    engine = make_engine(database_url)
    sessions = make_sessionmaker(engine)
    names = [f"node-{i:05d}" for i in range(1500)]
    writes = [NodeWrite(n, "p", json.dumps(node_sample(2)), 100.0, 100.0, 1) for n in names]
    listener = None
    if engine.dialect.name == "postgresql":
        listener = psycopg.connect(database_url.replace("postgresql+psycopg", "postgresql"), autocommit=True)
        listener.execute(f"LISTEN {CHANNEL}")
    try:
        with sessions.begin() as session:
            upsert_nodes(session=session, writes=writes, now=100.0)
        with sessions.begin() as session:  # again, newer: every row is updated, not inserted
            newer = [replace(w, last_sample_timestamp=200.0, last_seen_at=200.0) for w in writes]
            upsert_nodes(session=session, writes=newer, now=200.0)
        with sessions() as session:
            query = select(func.count(), func.min(NodeRow.samples_received), func.min(NodeRow.last_sample_timestamp))
            stored = session.execute(query).one()
        assert tuple(stored) == (1500, 2, 200.0)
        if listener is not None:
            payloads = [n.payload for n in listener.notifies(timeout=1.0, stop_after=None)]
            nodes = [p.split(" ", 2)[2] for p in payloads if p.startswith("nodes ")]
            notified = [name for keys in nodes for name in json.loads(keys)]
            assert sorted(notified) == sorted(names * 2)  # every node, for each of the two flushes
            # One statement a flush, so its keys in as few notifications as the trigger's ~7,000-byte parts allow
            # (4 here). Rows sent a statement at a time made 1,500 a flush; in multi-row INSERTs of 100 rows, 15.
            parts = math.ceil(sum(len(json.dumps(name)) + 2 for name in names) / 7000) + 1
            assert len(nodes) <= 2 * parts
    finally:
        if listener is not None:
            listener.close()
        engine.dispose()


def test_a_flush_stores_each_sample_exactly_as_received(database_url: str) -> None:
    """Samples go to PostgreSQL as binary arrays: quotes, backslashes, escapes and non-ASCII text come back unchanged,
    and a node without a pool keeps NULL."""
    upgrade_to_head(database_url)
    engine = make_engine(database_url)
    sessions = make_sessionmaker(engine)
    sample = json.dumps({**node_sample(1), "note": 'quote " backslash \\ nul \\u0000 tab \t ünï 🚀 {"a": [1]}'})
    raw = sample.replace('\\"', "\\u0022")  # the same JSON spelled differently: stored as sent, not re-encoded
    writes = [NodeWrite("node-a", None, sample, 1.0, 1.0, 1), NodeWrite("node-b", "p", raw, 1.0, 1.0, 3)]
    try:
        with sessions.begin() as session:
            upsert_nodes(session=session, writes=writes, now=5.0)
        with sessions() as session:
            rows = {n.name: (n.pool, n.sample, n.samples_received) for n in session.scalars(select(NodeRow))}
        assert rows == {"node-a": (None, sample, 1), "node-b": ("p", raw, 3)}
    finally:
        engine.dispose()


def test_on_sqlite_a_flush_is_a_few_statements_not_one_per_row(tmp_path: Path) -> None:
    """Python's sqlite3 lets go of the GIL for each statement it runs, and while the event loop is busy taking it
    back waits up to 5 ms: one statement per node made a flush of 12,500 nodes last minutes under load. Rows go
    500 a statement, each row still judged by its own timestamp (an older sample keeps the newer one)."""
    url = f"sqlite:///{tmp_path / 'nodes.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    statements: list[str] = []
    event.listen(engine, "connect", lambda dbapi, _: dbapi.set_trace_callback(statements.append))
    sessions = make_sessionmaker(engine)
    writes = [NodeWrite(f"node-{i:05d}", "p", json.dumps({"i": i}), 100.0, 100.0, 1) for i in range(1203)]
    try:
        with sessions.begin() as session:
            upsert_nodes(session=session, writes=writes, now=100.0)
        inserts = [s for s in statements if s.startswith("INSERT INTO nodes")]
        assert len(inserts) == 3  # 500 + 500 + 203
        mixed = [
            replace(w, sample="{}", last_sample_timestamp=100.0 + (-1 if i % 2 else 1)) for i, w in enumerate(writes)
        ]
        with sessions.begin() as session:
            upsert_nodes(session=session, writes=mixed, now=200.0)
        with sessions() as session:
            rows = {
                n.name: (n.sample, n.last_sample_timestamp, n.samples_received)
                for n in session.scalars(select(NodeRow))
            }
        assert rows == {w.name: ((w.sample, 100.0) if i % 2 else ("{}", 101.0)) + (2,) for i, w in enumerate(writes)}
    finally:
        engine.dispose()
