"""Durable counters: increments written in the transaction that stores their cause, read back by every replica.

A series is ``(name, labels)`` with ``labels`` in exposition text (``{kind="training",outcome="success"}``), spread
over ``COUNTER_SHARDS`` rows chosen by the writer (a hash of the job id), so that concurrent reports of different
jobs seldom queue on the same row lock. Rows are locked in sorted key order, so two writers never deadlock.

Every increment is also added to the row of the hour it is written in (``counter_hours``), so the same counters
answer windowed questions (``read_hours``: GPU-seconds by category between two times) long after Prometheus has
dropped its samples. Hours that are over are folded into one shard (``compact_hours``) and dropped after the
retention (``prune_hours``).
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import Table, delete, func, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mfumon.api.db.tables import CounterHourRow, CounterRow

COUNTER_SHARDS = 8
HOUR = 3600

CounterKey = tuple[str, str]  # (metric name, label text)
CounterValue = tuple[str, str, int, float]  # (name, labels, shard, value)


class Increments(defaultdict[CounterKey, float]):
    """What one transaction adds to the durable counters: ``increments[(name, labels)] += amount``."""

    def __init__(self) -> None:
        super().__init__(float)


def shard_of(key: str) -> int:
    """The shard a job's increments go to: stable across processes and replicas."""
    return zlib.crc32(key.encode()) % COUNTER_SHARDS


def add_to_counters(
    session: Session, increments: Mapping[CounterKey, float], *, shard: int, now: float
) -> list[CounterValue]:
    """Add ``increments`` (each >= 0; zeros skipped) and return the rows' new values, for the local state."""
    rows = [
        {"name": name, "labels": labels, "shard": shard, "value": float(value), "updated_at": now}
        for (name, labels), value in sorted(increments.items())
        if value > 0
    ]
    if not rows:
        return []
    table: Table = CounterRow.__table__  # type: ignore[assignment]
    insert = insert_for(session)
    stmt = insert(table).values(rows)
    upsert = stmt.on_conflict_do_update(
        index_elements=["name", "labels", "shard"],
        set_={"value": table.c.value + stmt.excluded.value, "updated_at": stmt.excluded.updated_at},
    ).returning(table.c.name, table.c.labels, table.c.shard, table.c.value)
    written = [(r.name, r.labels, r.shard, r.value) for r in session.execute(upsert)]
    hour = hour_of(now)
    _add_to_hours(session, [{**row, "hour": hour} for row in rows])
    return written


def hour_of(t: float) -> int:
    """The start of the hour ``t`` falls in (Unix seconds)."""
    return int(t // HOUR) * HOUR


def insert_for(session: Session) -> Callable[[Table], Any]:
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert  # type: ignore[return-value]


def _add_to_hours(session: Session, rows: list[dict[str, Any]]) -> None:
    hours: Table = CounterHourRow.__table__  # type: ignore[assignment]
    values = [{k: row[k] for k in ("hour", "name", "labels", "shard", "value")} for row in rows]
    for i in range(0, len(values), 1000):  # SQLite allows a few thousand parameters per statement
        stmt = insert_for(session)(hours).values(values[i : i + 1000])
        session.execute(
            stmt.on_conflict_do_update(
                index_elements=["hour", "name", "labels", "shard"],
                set_={"value": hours.c.value + stmt.excluded.value},
            )
        )


def read_hours(session: Session, *, names: Iterable[str], since: float, until: float) -> list[tuple[str, str, float]]:
    """``(name, labels, sum)`` of the increments written in the hours from ``since``'s to the one before ``until``
    (both rounded to whole hours: ``since`` down, ``until`` up)."""
    start, end = hour_of(since), hour_of(until) + (HOUR if until % HOUR else 0)
    stmt = (
        select(CounterHourRow.name, CounterHourRow.labels, func.sum(CounterHourRow.value))
        .where(CounterHourRow.name.in_(list(names)), CounterHourRow.hour >= start, CounterHourRow.hour < end)
        .group_by(CounterHourRow.name, CounterHourRow.labels)
    )
    return [(name, labels, float(value)) for name, labels, value in session.execute(stmt)]


def compact_hours(session: Session, *, before: float) -> int:
    """Fold the shards of the hours before ``before`` into shard 0; returns the rows folded.

    The rows are read locked and deleted by key, so an increment written to one of them meanwhile (a writer whose
    clock is an hour late) waits and lands in a fresh row, folded next time. Run under a billing mark, so that only
    one replica folds at a time.
    """
    hours: Table = CounterHourRow.__table__  # type: ignore[assignment]
    rows = session.execute(
        select(hours.c.hour, hours.c.name, hours.c.labels, hours.c.shard, hours.c.value)
        .where(hours.c.hour < hour_of(before), hours.c.shard != 0)
        .order_by(hours.c.hour, hours.c.name, hours.c.labels, hours.c.shard)
        .with_for_update()
    ).all()
    if not rows:
        return 0
    sums: dict[tuple[int, str, str], list[float]] = {}
    for hour, name, labels, _, value in rows:
        sums.setdefault((hour, name, labels), []).append(value)
    _add_to_hours(
        session,
        [
            {"hour": h, "name": n, "labels": lbl, "shard": 0, "value": math.fsum(values)}
            for (h, n, lbl), values in sums.items()
        ],
    )
    keys = [(r.hour, r.name, r.labels, r.shard) for r in rows]
    for i in range(0, len(keys), 500):
        session.execute(
            delete(hours).where(
                tuple_(hours.c.hour, hours.c.name, hours.c.labels, hours.c.shard).in_(keys[i : i + 500])
            )
        )
    return len(rows)


def prune_hours(session: Session, *, before: float) -> int:
    """Drop the hours that ended before ``before`` (the retention); returns the rows dropped."""
    result = session.execute(delete(CounterHourRow).where(CounterHourRow.hour < hour_of(before)))
    return int(getattr(result, "rowcount", 0) or 0)


def read_counters(session: Session, *, changed_after: float) -> Iterable[CounterValue]:
    stmt = select(CounterRow.name, CounterRow.labels, CounterRow.shard, CounterRow.value).where(
        CounterRow.updated_at > changed_after
    )
    return [(r.name, r.labels, r.shard, r.value) for r in session.execute(stmt)]
