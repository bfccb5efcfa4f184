"""Each job's software fingerprint (issue 59): component -> version, as the reporter, callbacks or wrap sent it.

``jobs.software`` travels with the job row, which replicas already follow; regressions across upgrades are found by
comparing jobs of one signature before and after a component changed.

Revision ID: 0019_job_software
Revises: 0018_serving_slo
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_job_software"
down_revision = "0018_serving_slo"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("software", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("software")
