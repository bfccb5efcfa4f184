"""Node and GPU rows: one push touches one node row and that node's GPU rows, whatever the cluster size."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from api.crud._upsert import upsert_rows
from api.db.models import Gpu, Node
from api.schemas.nodes import NodeSampleCreate


def record_node_sample(
    *, session: Session, node: str, sample: NodeSampleCreate, now: float
) -> tuple[Node, bool]:
    """Store a node sample; returns the node row and whether the sample was applied.

    A sample older than the newest one applied (a spool replay after an outage) counts as received and keeps
    the node alive, but does not overwrite newer GPU state.
    """
    row = session.scalars(select(Node).where(Node.name == node).with_for_update()).one_or_none()
    applied = row is None or sample.timestamp >= row.last_sample_timestamp
    if row is None:
        row = Node(name=node, samples_received=0, last_sample_timestamp=sample.timestamp)
        session.add(row)
    row.samples_received += 1
    row.last_seen_at = now
    row.updated_at = now
    if applied:
        row.pool = sample.pool
        row.last_sample_timestamp = sample.timestamp
        session.flush()
        upsert_rows(
            session,
            Gpu.__table__,  # type: ignore[arg-type]
            [
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
            ],
            key=["uuid"],
            update=["node", "index", "name", "mig_profile", "job_id", "up", "counters", "sample_timestamp"],
        )
        uuids = [gpu.uuid for gpu in sample.gpus]
        session.execute(delete(Gpu).where(Gpu.node == node, Gpu.uuid.not_in(uuids)))
    return row, applied


def read_node_gpus(*, session: Session, node: str) -> list[Gpu]:
    return list(session.scalars(select(Gpu).where(Gpu.node == node).order_by(Gpu.index, Gpu.uuid)))


def read_node(*, session: Session, node: str) -> Node | None:
    return session.get(Node, node)


def read_nodes(*, session: Session, since: float) -> list[Node]:
    """Nodes seen since ``since`` (older ones are silent and no longer part of the cluster)."""
    return list(session.scalars(select(Node).where(Node.last_seen_at >= since).order_by(Node.name)))


def read_gpus_of_job(*, session: Session, job_id: str) -> list[Gpu]:
    return list(session.scalars(select(Gpu).where(Gpu.job_id == job_id).order_by(Gpu.node, Gpu.index)))
