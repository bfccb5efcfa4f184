"""On-demand profiles (issue 32): the profiles asked of jobs and their ranks' summaries, and each job's latest figures.

``job_profiles`` is read from the database on every request (no replica mirrors it): no triggers. ``jobs.profile``
travels with the job row, which replicas already follow; ``job_reports.profiled_steps`` keeps profiled intervals out
of baseline windows.

Revision ID: 0016_job_profiles
Revises: 0015_report_hardware_mfu
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_job_profiles"
down_revision = "0015_report_hardware_mfu"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_profiles",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(128), sa.ForeignKey("jobs.job_id", ondelete="CASCADE"), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=True),
        sa.Column("ranks", sa.JSON(), nullable=True),
        sa.Column("requested_by", sa.String(128), nullable=True),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("delivered_at", sa.Float(), nullable=True),
        sa.Column("completed_at", sa.Float(), nullable=True),
        sa.Column("summaries", sa.JSON(), nullable=False),
    )
    op.create_index("ix_job_profiles_job_id_requested_at", "job_profiles", ["job_id", "requested_at"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("profile", sa.JSON(), nullable=True))
    with op.batch_alter_table("job_reports") as batch:
        batch.add_column(sa.Column("profiled_steps", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_reports") as batch:
        batch.drop_column("profiled_steps")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("profile")
    op.drop_index("ix_job_profiles_job_id_requested_at", table_name="job_profiles")
    op.drop_table("job_profiles")
