"""PostgreSQL tells every replica which rows of the mirrored tables changed (triggers that NOTIFY).

For every statement that inserts or updates a table every replica mirrors in memory (``KEYS``), a trigger sends
the keys it wrote on channel ``mfumon_changes``, delivered when its transaction commits
(``mfumon.migrations.change_triggers`` says how; ``mfumon.api.state.notify`` listens). A table mirrored later adds its
triggers in its own migration, in one line: ``create_change_triggers(table, key)``. SQLite: nothing to do.

Revision ID: 0010_change_notifications
Revises: 0009_node_sample_document
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from mfumon.migrations.change_triggers import FUNCTION, create_change_triggers, drop_change_triggers

revision = "0010_change_notifications"
down_revision = "0009_node_sample_document"
branch_labels = None
depends_on = None

# The tables mirrored at this revision; later ones add their own with create_change_triggers (one line each).
KEYS = {
    "nodes": "name",
    "jobs": "job_id",
    "baselines": "signature",
    "counters": "name",
    "scheduler_sources": "name",
    "queue_wait_histograms": "pool",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FUNCTION)
    for table, key in KEYS.items():
        create_change_triggers(table, key)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in KEYS:
        drop_change_triggers(table)
    op.execute("DROP FUNCTION IF EXISTS mfumon_notify_changed()")
