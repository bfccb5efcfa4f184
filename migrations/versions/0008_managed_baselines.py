"""Baselines people can manage: pinned (by whom, when, why), reset, raised by a steadily better run; the
throughput per GPU beside the MFU; and the jobs' parallel layout, for signatures that compare across GPU counts.

Revision ID: 0008_managed_baselines
Revises: 0007_usage_hours
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_managed_baselines"
down_revision = "0007_usage_hours"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("baselines") as batch:
        batch.alter_column("num_gpus", existing_type=sa.Integer(), nullable=True)
        batch.alter_column("mfu", existing_type=sa.Float(), nullable=True)
        batch.alter_column("source_job_id", existing_type=sa.String(128), nullable=True)
        batch.add_column(sa.Column("tokens_per_second_per_gpu", sa.Float(), nullable=True))
        batch.add_column(sa.Column("captures", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("previous_mfu", sa.Float(), nullable=True))
        batch.add_column(sa.Column("pinned", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("pinned_by", sa.String(128), nullable=True))
        batch.add_column(sa.Column("pinned_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("note", sa.String(256), nullable=True))
        batch.add_column(sa.Column("reset_by", sa.String(128), nullable=True))
        batch.add_column(sa.Column("reset_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("parallelism", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("parallelism")
    op.execute("DELETE FROM baselines WHERE mfu IS NULL")  # reset rows: nothing to go back to
    op.execute("UPDATE baselines SET source_job_id = '' WHERE source_job_id IS NULL")  # bare pins
    op.execute("UPDATE baselines SET num_gpus = 0 WHERE num_gpus IS NULL")
    with op.batch_alter_table("baselines") as batch:
        for column in (
            "version",
            "reset_at",
            "reset_by",
            "note",
            "pinned_at",
            "pinned_by",
            "pinned",
            "previous_mfu",
            "captures",
            "tokens_per_second_per_gpu",
        ):
            batch.drop_column(column)
        batch.alter_column("source_job_id", existing_type=sa.String(128), nullable=False)
        batch.alter_column("mfu", existing_type=sa.Float(), nullable=False)
        batch.alter_column("num_gpus", existing_type=sa.Integer(), nullable=False)
