"""Durable counters: increments written in the transaction that stores their cause, read back by every replica.

A series is ``(name, labels)`` with ``labels`` in exposition text (``{kind="training",outcome="success"}``), spread
over ``COUNTER_SHARDS`` rows chosen by the writer (a hash of the job id), so that concurrent reports of different
jobs seldom queue on the same row lock. Rows are locked in sorted key order, so two writers never deadlock.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from api.db.models import Counter

COUNTER_SHARDS = 8

CounterKey = tuple[str, str]  # (metric name, label text)
CounterRow = tuple[str, str, int, float]  # (name, labels, shard, value)


def shard_of(key: str) -> int:
    """The shard a job's increments go to: stable across processes and replicas."""
    return zlib.crc32(key.encode()) % COUNTER_SHARDS


def add_to_counters(
    session: Session, increments: Mapping[CounterKey, float], *, shard: int, now: float
) -> list[CounterRow]:
    """Add ``increments`` (each >= 0; zeros skipped) and return the rows' new values, for the local state."""
    rows = [
        {"name": name, "labels": labels, "shard": shard, "value": float(value), "updated_at": now}
        for (name, labels), value in sorted(increments.items())
        if value > 0
    ]
    if not rows:
        return []
    table: Table = Counter.__table__  # type: ignore[assignment]
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    stmt = insert(table).values(rows)
    upsert = stmt.on_conflict_do_update(
        index_elements=["name", "labels", "shard"],
        set_={"value": table.c.value + stmt.excluded.value, "updated_at": stmt.excluded.updated_at},
    ).returning(table.c.name, table.c.labels, table.c.shard, table.c.value)
    return [(r.name, r.labels, r.shard, r.value) for r in session.execute(upsert)]


def read_counters(session: Session, *, changed_after: float) -> Iterable[CounterRow]:
    stmt = select(Counter.name, Counter.labels, Counter.shard, Counter.value).where(Counter.updated_at > changed_after)
    return [(r.name, r.labels, r.shard, r.value) for r in session.execute(stmt)]
