"""Job events, durable counters, and the jobs' lifecycle and accounting columns.

Revision ID: 0004_job_events
Revises: 0003_node_health
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_job_events"
down_revision = "0003_node_health"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("restarts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("failures", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("outcome", sa.String(16), nullable=True))
        batch.add_column(sa.Column("accounting", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("summary", sa.JSON(), nullable=True))
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(128), sa.ForeignKey("jobs.job_id", ondelete="CASCADE"), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("timestamp", sa.Float(), nullable=True),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("inferred", sa.Text(), nullable=True),
    )
    op.create_index("ix_job_events_job_id_received_at", "job_events", ["job_id", "received_at"])
    op.create_index("ix_job_events_received_at", "job_events", ["received_at"])
    op.create_table(
        "counters",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("labels", sa.String(512), primary_key=True),
        sa.Column("shard", sa.SmallInteger(), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_counters_updated_at", "counters", ["updated_at"])


def downgrade() -> None:
    op.drop_table("counters")
    op.drop_table("job_events")
    op.drop_index("ix_jobs_status", "jobs")
    with op.batch_alter_table("jobs") as batch:
        for column in ("summary", "accounting", "outcome", "failures", "restarts"):
            batch.drop_column(column)
