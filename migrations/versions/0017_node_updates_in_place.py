"""Node rows are updated in place on PostgreSQL: no index on ``updated_at``, half of each page left free.

Every flush rewrites the row of every node that pushed. PostgreSQL writes a new version of the row each time; with
an index on a column the update changes (``updated_at``), each version needs new entries in every index of the
table and the old ones wait for vacuum, so the table and its indexes grew with every flush. With no indexed column
changed and room on the page, the new version goes beside the old one (a HOT update): no index entry, and the page
reclaims the dead version itself. Side by side (``bench/node_flush.py``, 15 flushes of 12,500 nodes,
``bench/results/node-flush-2026-12-04/``), PostgreSQL's CPU per node written went from 33.6 to 30.4 us (a scratch
run before it: 37.6 to 31.2) and the table, after those flushes and no vacuum, from 265 to 33 MB.

The index served one read: the replicas' catch-up after a lost notification connection (and the state loaded at
start), ``updated_at > since``, which now scans the table, one row per node (tens of MB at 100,000 GPUs), once per
reconnect. On SQLite the index goes too (it bought nothing there either); fillfactor is PostgreSQL's only. Pages
already full get their free half as their rows are next written, or at once with ``VACUUM FULL nodes``.

Revision ID: 0017_node_updates_in_place
Revises: 0016_job_profiles
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0017_node_updates_in_place"
down_revision = "0016_job_profiles"
branch_labels = None
depends_on = None

NODE_FILLFACTOR = 50  # a page of 8 KB holds about 8 rows of ~1 KB (the sample, lz4): 4 of them, and room for 4 more


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    op.drop_index("ix_nodes_updated_at", table_name="nodes")
    if _postgres():
        op.execute(f"ALTER TABLE nodes SET (fillfactor = {NODE_FILLFACTOR})")


def downgrade() -> None:
    if _postgres():
        op.execute("ALTER TABLE nodes RESET (fillfactor)")
    op.create_index("ix_nodes_updated_at", "nodes", ["updated_at"])
