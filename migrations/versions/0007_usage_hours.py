"""Durable counters by the hour (windowed questions: GPU-seconds by category between two times) and billing marks
(the cluster's idle and unreported GPU-seconds, billed once per interval whichever replica gets there).

Revision ID: 0007_usage_hours
Revises: 0006_bigint_counters
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_usage_hours"
down_revision = "0006_bigint_counters"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "counter_hours",
        sa.Column("hour", sa.BigInteger(), primary_key=True),
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("labels", sa.String(512), primary_key=True),
        sa.Column("shard", sa.SmallInteger(), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
    )
    op.create_table(
        "billing_marks",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("until", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("billing_marks")
    op.drop_table("counter_hours")
