"""A job's report history keeps the hardware's estimate of its MFU at the time, for the cross-check over time.

``job_reports`` is read from the database on every request (no replica mirrors it): no triggers.

Revision ID: 0015_report_hardware_mfu
Revises: 0014_remediation_cost
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_report_hardware_mfu"
down_revision = "0014_remediation_cost"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job_reports") as batch:
        batch.add_column(sa.Column("hardware_mfu", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_reports") as batch:
        batch.drop_column("hardware_mfu")
