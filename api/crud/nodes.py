"""Node rows: one conditional upsert stores many nodes' newest samples; readers load nodes by name or by age.

A node row holds the node's newest sample (the push's body, as received). The upsert is correct whatever order writes
arrive in, from one process or several: an older sample never replaces a newer one (``CASE`` on the sample
timestamp), ``samples_received`` adds each writer's count in SQL, and ``last_seen_at`` only moves forward.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, case, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from api.db.models import Node
from api.schemas.nodes import NodeSampleCreate

_NODES: Table = Node.__table__  # type: ignore[assignment]


def decode_sample(stored: str) -> NodeSampleCreate:
    """A stored push, validated again as it was when it arrived (the same schema, the same views)."""
    return NodeSampleCreate.model_validate_json(stored)


@dataclass(frozen=True, slots=True)
class NodeWrite:
    """What one process has to store for a node: its newest sample and how many pushes it received."""

    name: str
    pool: str | None
    sample: str  # the push's body as received
    last_sample_timestamp: float
    last_seen_at: float
    samples: int


@functools.cache
def _upsert(dialect: str) -> Any:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(_NODES)
    new, old = stmt.excluded, _NODES.c
    newer = new.last_sample_timestamp >= old.last_sample_timestamp

    def newest(column: str) -> Any:
        return case((newer, new[column]), else_=old[column])

    upsert = stmt.on_conflict_do_update(
        index_elements=["name"],
        set_={
            "pool": newest("pool"),
            "sample": newest("sample"),
            "last_sample_timestamp": newest("last_sample_timestamp"),
            "last_seen_at": case((new.last_seen_at > old.last_seen_at, new.last_seen_at), else_=old.last_seen_at),
            "samples_received": old.samples_received + new.samples_received,
            "updated_at": new.updated_at,
        },
    )
    return upsert.returning(_NODES.c.name) if dialect == "postgresql" else upsert  # see upsert_nodes


def upsert_nodes(*, session: Session, writes: Sequence[NodeWrite], now: float) -> None:
    """Store the writes (one per node: a statement may not upsert a row twice) in one executemany, about 20 us of
    this process's CPU per node.

    On PostgreSQL the statement asks for RETURNING, which is what makes SQLAlchemy send the rows as multi-row
    INSERTs (its "insertmanyvalues", ``api.db.session.INSERT_PAGE_ROWS`` rows each; plain ON CONFLICT executemany
    goes a row at a time): the replicas' change trigger (``migrations.change_triggers``) runs once per statement,
    and a row at a time it cost PostgreSQL ~0.2 ms per node, four times the upsert itself, and sent every replica a
    notification per node.
    """
    if not writes:
        return
    rows = [
        {
            "name": w.name,
            "pool": w.pool,
            "sample": w.sample,
            "last_sample_timestamp": w.last_sample_timestamp,
            "last_seen_at": w.last_seen_at,
            "samples_received": w.samples,
            "updated_at": now,
        }
        for w in writes
    ]
    session.execute(_upsert(session.get_bind().dialect.name), rows).close()


def read_nodes(*, session: Session, names: Sequence[str] | None = None, since: float | None = None) -> list[Node]:
    """Node rows by name, or changed after ``since`` (``updated_at``), or all."""
    stmt = select(Node)
    if names is not None:
        stmt = stmt.where(Node.name.in_(names))
    if since is not None:
        stmt = stmt.where(Node.updated_at > since)
    return list(session.scalars(stmt))
