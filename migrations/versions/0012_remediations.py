"""The audit of ``mfumon remediate``: drains, resumes, cordons, dry runs and actions withheld by a rail.

Revision ID: 0012_remediations
Revises: 0011_node_sample_lz4
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_remediations"
down_revision = "0011_node_sample_lz4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "remediations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("node", sa.String(128), nullable=False),
        sa.Column("scheduler", sa.String(16), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(128), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("checks", sa.JSON(), nullable=False),
        sa.Column("pools", sa.JSON(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(128), nullable=True),
        sa.Column("recorded_by", sa.String(64), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.Float(), nullable=False),
        sa.Column("last_at", sa.Float(), nullable=False),
        sa.Column("repeats", sa.Integer(), nullable=False),
    )
    op.create_index("ix_remediations_node_last_at", "remediations", ["node", "last_at"])
    op.create_index("ix_remediations_last_at", "remediations", ["last_at"])


def downgrade() -> None:
    op.drop_table("remediations")
