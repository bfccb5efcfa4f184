"""Node and GPU rows: one push touches one node row and that node's GPU rows, whatever the cluster size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, delete, insert, select, update
from sqlalchemy.orm import Session

from api.crud._upsert import upsert_rows
from api.db.models import Gpu, Node
from api.schemas.nodes import NodeSampleCreate

_GPU_COLUMNS = ("node", "index", "name", "mig_profile", "job_id", "up", "counters", "sample_timestamp")


@dataclass(frozen=True, slots=True)
class NodeState:
    """The node row after a push."""

    pool: str | None
    last_sample_timestamp: float
    samples_received: int
    ib_ports: list[dict[str, Any]] | None = None  # of this sample (whether applied or not)


def record_node_sample(*, session: Session, node: str, sample: NodeSampleCreate, now: float) -> tuple[NodeState, bool]:
    """Store a node sample; returns the node's state and whether the sample was applied.

    A sample older than the newest one applied (a spool replay after an outage) counts as received and keeps
    the node alive, but does not overwrite newer GPU state. The newest timestamp is kept no later than the push's
    arrival (``now``), so a sample dated in the future (a fast clock, a forged push) never outranks the real samples
    taken after it arrived. Core statements, not ORM objects: this is the hottest write path, and every statement
    touches only this node's rows.
    """
    newest = min(sample.timestamp, now)
    nodes: Table = Node.__table__  # type: ignore[assignment]
    ports = None if sample.ib_ports is None else [p.model_dump(exclude_none=True) for p in sample.ib_ports]
    held = session.execute(
        select(nodes.c.pool, nodes.c.last_sample_timestamp, nodes.c.samples_received)
        .where(nodes.c.name == node)
        .with_for_update()
    ).one_or_none()
    applied = held is None or sample.timestamp >= held.last_sample_timestamp
    if held is None:
        state = NodeState(sample.pool, newest, 1, ports)
        session.execute(
            insert(nodes).values(
                name=node,
                pool=sample.pool,
                ib_ports=ports,
                last_seen_at=now,
                last_sample_timestamp=newest,
                samples_received=1,
                updated_at=now,
            )
        )
    else:
        state = NodeState(
            sample.pool if applied else held.pool,
            newest if applied else held.last_sample_timestamp,
            held.samples_received + 1,
            ports,
        )
        changes = {"ib_ports": ports} if applied else {}
        session.execute(
            update(nodes)
            .where(nodes.c.name == node)
            .values(
                pool=state.pool,
                last_seen_at=now,
                last_sample_timestamp=state.last_sample_timestamp,
                samples_received=nodes.c.samples_received + 1,
                updated_at=now,
                **changes,
            )
        )
    if applied:
        rows = [
            {
                "uuid": gpu.uuid,
                "node": node,
                "index": gpu.index,
                "name": gpu.name,
                "mig_profile": gpu.mig_profile,
                "job_id": gpu.job_id,
                "up": gpu.up,
                "counters": gpu.counters() if gpu.up else {},
                "sample_timestamp": sample.timestamp,
            }
            for gpu in sample.gpus
        ]
        upsert_rows(session, Gpu.__table__, rows, key=["uuid"], update=_GPU_COLUMNS)  # type: ignore[arg-type]
        uuids = [gpu.uuid for gpu in sample.gpus]
        session.execute(delete(Gpu).where(Gpu.node == node, Gpu.uuid.not_in(uuids)))
    return state, applied


def read_gpus_of_job(*, session: Session, job_id: str) -> list[Gpu]:
    return list(session.scalars(select(Gpu).where(Gpu.job_id == job_id).order_by(Gpu.node, Gpu.index)))
