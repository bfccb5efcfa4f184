"""The driver and firmware each node's agent reports (issue 59): a list of {component, version}, the last one sent.

``nodes.software`` is written only when a push carries a list that differs from the one the aggregator holds (a
push without one keeps it), so the node upsert, an in-place hot path (0017_node_updates_in_place), stays as cheap:
the column is NULL-bound and left as it is on nearly every flush. Jobs take the driver and VBIOS of the nodes their
GPUs are attributed to into their software fingerprint.

Revision ID: 0020_node_software
Revises: 0019_job_software
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_node_software"
down_revision = "0019_job_software"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("software", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("software")
