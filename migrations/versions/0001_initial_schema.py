"""Initial schema: nodes and their GPUs, jobs, job report history, baselines.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("pool", sa.String(128), nullable=True),
        sa.Column("last_seen_at", sa.Float(), nullable=False),
        sa.Column("last_sample_timestamp", sa.Float(), nullable=False),
        sa.Column("samples_received", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_nodes_updated_at", "nodes", ["updated_at"])
    op.create_table(
        "gpus",
        sa.Column("uuid", sa.String(128), primary_key=True),
        sa.Column("node", sa.String(128), sa.ForeignKey("nodes.name", ondelete="CASCADE"), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("mig_profile", sa.String(64), nullable=True),
        sa.Column("job_id", sa.String(128), nullable=True),
        sa.Column("up", sa.Boolean(), nullable=False),
        sa.Column("counters", sa.JSON(), nullable=False),
        sa.Column("sample_timestamp", sa.Float(), nullable=False),
    )
    op.create_index("ix_gpus_node", "gpus", ["node"])
    op.create_index("ix_gpus_job_id", "gpus", ["job_id"])
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.String(128), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(128), nullable=True),
        sa.Column("team", sa.String(128), nullable=True),
        sa.Column("pool", sa.String(128), nullable=True),
        sa.Column("gpu_model", sa.String(128), nullable=True),
        sa.Column("dtype", sa.String(8), nullable=False),
        sa.Column("num_gpus", sa.Integer(), nullable=True),
        sa.Column("gpus_requested", sa.Integer(), nullable=True),
        sa.Column("model", sa.JSON(), nullable=True),
        sa.Column("peak_flops_per_gpu", sa.Float(), nullable=True),
        sa.Column("recompute_activations", sa.Boolean(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("last_report_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reports_received", sa.Integer(), nullable=False),
        sa.Column("latest", sa.JSON(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_jobs_updated_at", "jobs", ["updated_at"])
    op.create_table(
        "job_reports",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(128), sa.ForeignKey("jobs.job_id", ondelete="CASCADE"), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("tokens_per_second", sa.Float(), nullable=False),
        sa.Column("num_gpus", sa.Integer(), nullable=True),
        sa.Column("mfu", sa.Float(), nullable=True),
        sa.Column("hfu", sa.Float(), nullable=True),
        sa.Column("model_flops_per_second", sa.Float(), nullable=True),
        sa.Column("comm_ratio", sa.Float(), nullable=True),
        sa.Column("data_wait_ratio", sa.Float(), nullable=True),
        sa.Column("step_seconds", sa.Float(), nullable=True),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
    )
    op.create_index("ix_job_reports_job_id_received_at", "job_reports", ["job_id", "received_at"])
    op.create_table(
        "baselines",
        sa.Column("signature", sa.String(512), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("model_key", sa.String(256), nullable=False),
        sa.Column("gpu_model", sa.String(128), nullable=False),
        sa.Column("num_gpus", sa.Integer(), nullable=False),
        sa.Column("dtype", sa.String(8), nullable=False),
        sa.Column("mfu", sa.Float(), nullable=False),
        sa.Column("source_job_id", sa.String(128), nullable=False),
        sa.Column("captured_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_baselines_updated_at", "baselines", ["updated_at"])


def downgrade() -> None:
    op.drop_table("baselines")
    op.drop_table("job_reports")
    op.drop_table("jobs")
    op.drop_table("gpus")
    op.drop_table("nodes")
