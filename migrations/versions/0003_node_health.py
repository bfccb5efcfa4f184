"""Fleet health: a node's InfiniBand/RoCE ports, as its exporter last reported them.

Revision ID: 0003_node_health
Revises: 0002_inference
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_node_health"
down_revision = "0002_inference"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("ib_ports", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("ib_ports")
