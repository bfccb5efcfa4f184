"""Serving jobs (issue 55): each job's latency targets, and each serving report's request figures.

``jobs.slo`` travels with the job row, which replicas already follow. ``job_reports.serving`` keeps what one serving
report's latency histograms came to (requests within each target, percentiles, queue and KV-cache pressure): the
SLO goodput over a window is summed from these rows, and the job page draws them over time.

Revision ID: 0018_serving_slo
Revises: 0017_node_updates_in_place
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_serving_slo"
down_revision = "0017_node_updates_in_place"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("slo", sa.JSON(), nullable=True))
    with op.batch_alter_table("job_reports") as batch:
        batch.add_column(sa.Column("serving", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_reports") as batch:
        batch.drop_column("serving")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("slo")
