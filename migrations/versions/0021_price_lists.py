"""The operator's price lists (issue 60): every one ever set, the newest in effect.

Revision ID: 0021_price_lists
Revises: 0020_node_software
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_price_lists"
down_revision = "0020_node_software"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "price_lists",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("set_at", sa.Float(), nullable=False),
        sa.Column("set_by", sa.String(length=136), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
    )
    op.create_index("ix_price_lists_set_at", "price_lists", ["set_at"])


def downgrade() -> None:
    op.drop_index("ix_price_lists_set_at", table_name="price_lists")
    op.drop_table("price_lists")
