"""Scheduler adapters: what the scheduler says about each job, the sources' quotas, and queue-wait histograms.

Revision ID: 0005_scheduler
Revises: 0004_job_events
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_scheduler"
down_revision = "0004_job_events"
branch_labels = None
depends_on = None


def _job_columns() -> tuple[sa.Column[object], ...]:
    return (
        sa.Column("source", sa.String(64), nullable=True),
        sa.Column("submitted_at", sa.Float(), nullable=True),
        sa.Column("queued_at", sa.Float(), nullable=True),
        sa.Column("pending_reason", sa.String(64), nullable=True),
        sa.Column("scheduler_restarts", sa.Integer(), nullable=True),
        sa.Column("gpus_scheduled", sa.Integer(), nullable=True),
        sa.Column("placement", sa.JSON(), nullable=True),
        sa.Column("request_units", sa.JSON(), nullable=True),
        sa.Column("end_state", sa.String(32), nullable=True),
    )


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in _job_columns():
            batch.add_column(column)
        batch.create_index("ix_jobs_source", ["source"])
    op.create_table(
        "scheduler_sources",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("observed_at", sa.Float(), nullable=False),
        sa.Column("synced_at", sa.Float(), nullable=False),
        sa.Column("quotas", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_scheduler_sources_updated_at", "scheduler_sources", ["updated_at"])
    op.create_table(
        "queue_wait_histograms",
        sa.Column("pool", sa.String(128), primary_key=True),
        sa.Column("team", sa.String(128), primary_key=True),
        sa.Column("buckets", sa.JSON(), nullable=False),
        sa.Column("sum_seconds", sa.Float(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_queue_wait_histograms_updated_at", "queue_wait_histograms", ["updated_at"])


def downgrade() -> None:
    op.drop_table("queue_wait_histograms")
    op.drop_table("scheduler_sources")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_source")
        for column in reversed(_job_columns()):
            batch.drop_column(column.name)
