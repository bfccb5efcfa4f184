"""Inference: how a served model is stored (for MBU), and MBU and phase figures in the report history.

Revision ID: 0002_inference
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_inference"
down_revision = "0001"
branch_labels = None
depends_on = None

_REPORT_COLUMNS = ("mbu", "prefill_tokens_per_second", "decode_tokens_per_second", "prefill_mfu", "decode_mfu")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("weight_dtype", sa.String(8), nullable=True))
        batch.add_column(sa.Column("kv_cache_dtype", sa.String(8), nullable=True))
        batch.add_column(sa.Column("peak_memory_bandwidth_per_gpu", sa.Float(), nullable=True))
    with op.batch_alter_table("job_reports") as batch:
        for name in _REPORT_COLUMNS:
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_reports") as batch:
        for name in _REPORT_COLUMNS:
            batch.drop_column(name)
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("peak_memory_bandwidth_per_gpu")
        batch.drop_column("kv_cache_dtype")
        batch.drop_column("weight_dtype")
