"""Node rows: one conditional upsert stores many nodes' newest samples; readers load nodes by name or by age.

A node row holds the node's newest sample (the push's body, as received). The upsert is correct whatever order writes
arrive in, from one process or several: an older sample never replaces a newer one (``CASE`` on the sample
timestamp), ``samples_received`` adds each writer's count in SQL, and ``last_seen_at`` only moves forward. The node's
software (its driver and firmware, issue 59) is bound only when it changed: NULL, the usual value, keeps the stored
one, so the column costs a flush one NULL per node and the row's update stays the in-place update it was.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import JSON, Table, Text, bindparam, case, cast, func, null, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mfumon.api.db.arrays import BinaryArray
from mfumon.api.db.tables import NodeRow
from mfumon.api.schemas.nodes import NodeSampleCreate, decode_push

_NODES: Table = NodeRow.__table__  # type: ignore[assignment]


def decode_sample(stored: str) -> NodeSampleCreate:
    """A stored push, validated again as it was when it arrived (the same schema, the same views)."""
    return decode_push(stored)


@dataclass(frozen=True, slots=True)
class NodeWrite:
    """What one process has to store for a node: its newest sample and how many pushes it received."""

    name: str
    pool: str | None
    sample: str  # the push's body as received
    last_sample_timestamp: float
    last_seen_at: float
    samples: int
    software: list[dict[str, str]] | None = None  # the node's software when it changed, else None: the stored one stays


# In the table's order, which is the order SQLite's compiled upsert takes them in (no reordering per row).
_COLUMNS = (
    "name",
    "pool",
    "last_seen_at",
    "last_sample_timestamp",
    "samples_received",
    "updated_at",
    "sample",
    "software",
)


@functools.cache
def _upsert(dialect: str) -> Any:
    """SQLite: an INSERT of one row (expanded to many, see _sqlite_upsert). PostgreSQL: one INSERT of every row,
    sent as one binary array per column and unnested in the server (see upsert_nodes)."""
    stmt: Any
    if dialect == "postgresql":
        # The software goes as text (JSON written by _values) and becomes json in the server, as the sample does not
        # need to: psycopg has no binary dumper for an array of JSON documents.
        types = {c: Text() if c == "software" else _NODES.c[c].type for c in _COLUMNS}
        arrays = [bindparam(c, type_=BinaryArray(types[c])) for c in _COLUMNS]
        rows = func.unnest(*arrays).table_valued(*_COLUMNS).render_derived()
        values = [cast(rows.c[c], JSON) if c == "software" else rows.c[c] for c in _COLUMNS]
        stmt = postgresql.insert(_NODES).from_select(list(_COLUMNS), select(*values))
    else:
        stmt = sqlite.insert(_NODES)
    new, old = stmt.excluded, _NODES.c
    newer = new.last_sample_timestamp >= old.last_sample_timestamp

    def newest(column: str) -> Any:
        return case((newer, new[column]), else_=old[column])

    return stmt.on_conflict_do_update(
        index_elements=["name"],
        set_={
            "pool": newest("pool"),
            "sample": newest("sample"),
            "last_sample_timestamp": newest("last_sample_timestamp"),
            "last_seen_at": case((new.last_seen_at > old.last_seen_at, new.last_seen_at), else_=old.last_seen_at),
            "samples_received": old.samples_received + new.samples_received,
            "updated_at": new.updated_at,
            # Only a newer sample's, and only when it brought one (NULL: unchanged, keep the stored list).
            "software": case((newer & new.software.is_not(None), new.software), else_=old.software),
        },
    )


# SQLite (3.32+) binds at most 32,766 values a statement; 500 rows of 8 values is well under that, and cost less CPU
# per row than 2,000 or 8,000 rows a statement when measured side by side.
_SQLITE_ROWS_PER_STATEMENT = 500


@functools.cache
def _sqlite_upsert_parts() -> tuple[str, str, str]:
    """The one-row SQLite upsert, compiled once and cut around its ``VALUES (?, ...)``: the text before, the row and
    the text after (the ``ON CONFLICT`` clause). Rows are bound in :data:`_COLUMNS` order, which must be the order of
    the compiled placeholders."""
    compiled = _upsert("sqlite").compile(dialect=sqlite.dialect(), column_keys=list(_COLUMNS))
    row = "(" + ", ".join("?" * len(_COLUMNS)) + ")"
    head, values, tail = str(compiled).partition(f" VALUES {row}")
    if not values or row in tail:  # a SQLAlchemy that compiles otherwise: fail loudly, not store wrong columns
        raise RuntimeError(f"unexpected SQLite upsert: {compiled}")
    if tuple(compiled.positiontup or ()) != _COLUMNS:  # likewise: binding by position must match the columns
        raise RuntimeError(f"SQLite upsert binds {compiled.positiontup}, not {_COLUMNS}")
    return f"{head} VALUES ", row, tail


def _sqlite_upsert(session: Session, rows: Sequence[tuple[Any, ...]]) -> None:
    """Many rows per statement, not one statement per row (an executemany): Python's sqlite3 lets go of the GIL
    for every statement it steps, and while the event loop is busy, taking it back waits out the switch interval
    (5 ms). Row by row, a flush of 12,500 nodes took 0.4 s alone and 92 s beside a busy thread; 500 rows a
    statement, 0.4 and 0.7 s (``bench/sqlite_beside_loop.py``). ``rows``: values in :data:`_COLUMNS` order."""
    head, row, tail = _sqlite_upsert_parts()
    connection = session.connection()
    for start in range(0, len(rows), _SQLITE_ROWS_PER_STATEMENT):
        chunk = rows[start : start + _SQLITE_ROWS_PER_STATEMENT]
        sql = head + ", ".join([row] * len(chunk)) + tail
        connection.exec_driver_sql(sql, tuple(itertools.chain.from_iterable(chunk)))


def _values(writes: Sequence[NodeWrite], now: float) -> list[tuple[Any, ...]]:
    """Each write's values in :data:`_COLUMNS` order, stamped ``now`` (``updated_at``); the software as JSON text."""
    return [
        (
            w.name,
            w.pool,
            w.last_seen_at,
            w.last_sample_timestamp,
            w.samples,
            now,
            w.sample,
            None if w.software is None else json.dumps(w.software, separators=(",", ":")),
        )
        for w in writes
    ]


def node_rows(writes: Sequence[NodeWrite], now: float) -> list[dict[str, Any]]:
    """The writes as rows of the node table, stamped ``now`` (``updated_at``); the software as the table's JSON column
    takes it (``null()``: SQL NULL, where None would be stored as JSON ``null``)."""
    return [
        {**dict(zip(_COLUMNS, values, strict=True)), "software": null() if write.software is None else write.software}
        for write, values in zip(writes, _values(writes, now), strict=True)
    ]


def upsert_nodes(*, session: Session, writes: Sequence[NodeWrite], now: float) -> None:
    """Store the writes, one per node (a statement may not upsert a row twice), in one statement.

    On PostgreSQL that is one ``INSERT ... SELECT FROM unnest(...)`` whatever the number of nodes: 7-11 us of this
    process's CPU and 40-50 us of PostgreSQL's per node, most of that compressing the sample (lz4, migration 0011;
    ``bench/node_flush.py``). The replicas' change trigger
    (``mfumon.migrations.change_triggers``) runs once per statement. Rows sent a statement at a time had cost PostgreSQL
    ~0.2 ms per node, mostly that trigger; SQLAlchemy's multi-row INSERTs ("insertmanyvalues") ~35 us of this
    process's CPU per node, mostly psycopg quoting the JSON samples for the statement's text. On SQLite, 500 rows
    a statement (see _sqlite_upsert for why not an executemany): 0.3-0.6 s of wall time for 12,500 nodes, most of
    it SQLite's own work, done with the GIL released.
    """
    if not writes:
        return
    values = _values(writes, now)
    if session.get_bind().dialect.name == "postgresql":  # one array per column
        columns = zip(*values, strict=True)
        session.execute(
            _upsert("postgresql"), {name: list(column) for name, column in zip(_COLUMNS, columns, strict=True)}
        )
    else:
        _sqlite_upsert(session, values)


def read_nodes(*, session: Session, names: Sequence[str] | None = None, since: float | None = None) -> list[NodeRow]:
    """Node rows by name, or changed after ``since`` (``updated_at``), or all."""
    stmt = select(NodeRow)
    if names is not None:
        stmt = stmt.where(NodeRow.name.in_(names))
    if since is not None:
        stmt = stmt.where(NodeRow.updated_at > since)
    return list(session.scalars(stmt))
