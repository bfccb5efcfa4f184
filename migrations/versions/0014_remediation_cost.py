"""What a drain cost and saved in GPU-hours: a remediation row keeps since when the node was failing and its GPUs.

``remediations`` is read from the database on every request (no replica mirrors it): no triggers.

Revision ID: 0014_remediation_cost
Revises: 0013_scheduler_pools
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_remediation_cost"
down_revision = "0013_scheduler_pools"
branch_labels = None
depends_on = None

_COLUMNS = (("failing_since", sa.Float()), ("gpus", sa.Integer()), ("gpus_busy", sa.Integer()))


def upgrade() -> None:
    with op.batch_alter_table("remediations") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("remediations") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
