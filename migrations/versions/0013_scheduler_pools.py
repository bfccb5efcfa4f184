"""Pools as the scheduler defines them: each scheduler source keeps the pools (partitions) it lists and their nodes.

``scheduler_sources`` is mirrored by every replica already (its change triggers come with
``0010_change_notifications``); the new column travels with the row, so no trigger changes.

Revision ID: 0013_scheduler_pools
Revises: 0012_remediations
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_scheduler_pools"
down_revision = "0012_remediations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scheduler_sources") as batch:
        batch.add_column(sa.Column("pools", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scheduler_sources") as batch:
        batch.drop_column("pools")
