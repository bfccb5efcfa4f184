"""64-bit report ids and steps on PostgreSQL, as SQLite's integers already are.

A report's ``step`` is a counter that may pass 2^31 (an inference server's iterations), and ``job_reports.id``
takes one value per report ever stored: 10,000 jobs reporting every 10 s use up a 32-bit sequence in 25 days.

Revision ID: 0006_bigint_counters
Revises: 0005_scheduler
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_bigint_counters"
down_revision = "0005_scheduler"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job_reports") as batch:  # SQLite: the declared type only, its integers are 64-bit
        batch.alter_column("step", type_=sa.BigInteger(), existing_type=sa.Integer())
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite's INTEGER PRIMARY KEY must stay INTEGER: it is the auto-increment rowid
    op.alter_column("job_reports", "id", type_=sa.BigInteger(), existing_type=sa.Integer())
    op.execute("ALTER SEQUENCE IF EXISTS job_reports_id_seq AS bigint")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER SEQUENCE IF EXISTS job_reports_id_seq AS integer")
        op.alter_column("job_reports", "id", type_=sa.Integer(), existing_type=sa.BigInteger())
    with op.batch_alter_table("job_reports") as batch:
        batch.alter_column("step", type_=sa.Integer(), existing_type=sa.BigInteger())
