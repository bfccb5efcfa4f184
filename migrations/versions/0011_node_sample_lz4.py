"""PostgreSQL compresses the node sample with lz4 instead of pglz.

Every flush rewrites the sample of every node that pushed: a JSON document of about 3.4 KB for 8 GPUs, over
PostgreSQL's 2 KB threshold, so each write compresses it. With the default (pglz) that compression was a third
or more of PostgreSQL's CPU for the group commit: side by side (``bench/node_flush.py``, results in
``bench/results/cpu-2026-12-01f/``), PostgreSQL's CPU per node written went from 64 to 40 us at 5,000 nodes a
flush (0.62x) and from 66 to 49 us at 12,500 (0.74x), the table about as large. Needs PostgreSQL 14 or later
built with lz4 (Debian's and the official images are); elsewhere, and on SQLite, nothing changes. Rows already
stored keep pglz until their next write.

Revision ID: 0011_node_sample_lz4
Revises: 0010_change_notifications
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0011_node_sample_lz4"
down_revision = "0010_change_notifications"
branch_labels = None
depends_on = None

_HAS_LZ4 = "SELECT count(*) FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"


def _lz4_available() -> bool:
    bind = op.get_bind()
    return bind.dialect.name == "postgresql" and bool(bind.execute(text(_HAS_LZ4)).scalar())


def upgrade() -> None:
    if _lz4_available():
        op.execute("ALTER TABLE nodes ALTER COLUMN sample SET COMPRESSION lz4")


def downgrade() -> None:
    if _lz4_available():
        op.execute("ALTER TABLE nodes ALTER COLUMN sample SET COMPRESSION DEFAULT")
