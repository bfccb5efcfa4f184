"""A node's newest sample moves into its row as one JSON document, the push as received (the ``gpus`` table and the
``ib_ports`` column go into it).

A push replaces a node's whole GPU list, and every reader loads it whole: one row per node makes the write one
conditional upsert (older samples never overwrite newer ones, by construction) and a replica's read one row.

Revision ID: 0009_node_sample_document
Revises: 0008_managed_baselines
Create Date: 2026-11-30
"""

from __future__ import annotations

import json
from collections import defaultdict

import sqlalchemy as sa
from alembic import op

revision = "0009_node_sample_document"
down_revision = "0008_managed_baselines"
branch_labels = None
depends_on = None

_COUNTERS_EXCLUDED = ("uuid", "node", "index", "name", "mig_profile", "job_id", "up", "sample_timestamp")


def upgrade() -> None:
    op.add_column(
        "nodes", sa.Column("sample", sa.Text(), nullable=False, server_default='{"timestamp": 0, "gpus": []}')
    )
    conn = op.get_bind()
    gpus = sa.table(
        "gpus",
        sa.column("uuid"),
        sa.column("node"),
        sa.column("index"),
        sa.column("name"),
        sa.column("mig_profile"),
        sa.column("job_id"),
        sa.column("up"),
        sa.column("counters", sa.JSON()),
    )
    by_node: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in conn.execute(sa.select(gpus).order_by(gpus.c.node, gpus.c.index)).mappings():
        gpu = {"uuid": row["uuid"], "index": row["index"], "name": row["name"], "up": bool(row["up"])}
        gpu.update({k: row[k] for k in ("mig_profile", "job_id") if row[k] is not None})
        gpu.update(row["counters"] or {})
        by_node[row["node"]].append(gpu)
    nodes = sa.table(
        "nodes",
        sa.column("name"),
        sa.column("pool"),
        sa.column("last_sample_timestamp"),
        sa.column("ib_ports", sa.JSON()),
        sa.column("sample"),
    )
    query = sa.select(nodes.c.name, nodes.c.pool, nodes.c.last_sample_timestamp, nodes.c.ib_ports)
    for node in conn.execute(query).all():
        sample: dict[str, object] = {"timestamp": node.last_sample_timestamp, "gpus": by_node.get(node.name, [])}
        if node.pool is not None:
            sample["pool"] = node.pool
        if node.ib_ports is not None:
            sample["ib_ports"] = node.ib_ports
        conn.execute(sa.update(nodes).where(nodes.c.name == node.name).values(sample=json.dumps(sample)))
    op.drop_table("gpus")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("ib_ports")


def downgrade() -> None:
    op.create_table(
        "gpus",
        sa.Column("uuid", sa.String(128), primary_key=True),
        sa.Column("node", sa.String(128), sa.ForeignKey("nodes.name", ondelete="CASCADE"), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("mig_profile", sa.String(64), nullable=True),
        sa.Column("job_id", sa.String(128), nullable=True),
        sa.Column("up", sa.Boolean(), nullable=False),
        sa.Column("counters", sa.JSON(), nullable=False),
        sa.Column("sample_timestamp", sa.Float(), nullable=False),
    )
    op.create_index("ix_gpus_node", "gpus", ["node"])
    op.create_index("ix_gpus_job_id", "gpus", ["job_id"])
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("ib_ports", sa.JSON(), nullable=True))
    conn = op.get_bind()
    nodes = sa.table(
        "nodes",
        sa.column("name"),
        sa.column("sample"),
        sa.column("last_sample_timestamp"),
        sa.column("ib_ports", sa.JSON()),
    )
    gpus = sa.table(
        "gpus",
        sa.column("uuid"),
        sa.column("node"),
        sa.column("index"),
        sa.column("name"),
        sa.column("mig_profile"),
        sa.column("job_id"),
        sa.column("up"),
        sa.column("counters", sa.JSON()),
        sa.column("sample_timestamp"),
    )
    rows = []
    for node in conn.execute(sa.select(nodes)).mappings():
        sample = json.loads(node["sample"])
        if sample.get("ib_ports") is not None:
            ports = nodes.update().where(nodes.c.name == node["name"]).values(ib_ports=sample["ib_ports"])
            conn.execute(ports)
        for gpu in sample["gpus"]:
            counters = {k: v for k, v in gpu.items() if k not in _COUNTERS_EXCLUDED}
            rows.append(
                {
                    "uuid": gpu["uuid"],
                    "node": node["name"],
                    "index": gpu["index"],
                    "name": gpu["name"],
                    "mig_profile": gpu.get("mig_profile"),
                    "job_id": gpu.get("job_id"),
                    "up": gpu.get("up", True),
                    "counters": counters,
                    "sample_timestamp": node["last_sample_timestamp"],
                }
            )
    if rows:
        conn.execute(sa.insert(gpus), rows)
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("sample")
