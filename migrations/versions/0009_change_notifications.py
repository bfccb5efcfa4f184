"""PostgreSQL tells every replica which rows of the mirrored tables changed (triggers that NOTIFY).

For every statement that inserts or updates a table every replica mirrors in memory (``KEYS``), a trigger sends
``<table> <writer> <JSON list of keys>`` on channel ``mfumon_changes`` (several notifications when the keys would
pass PostgreSQL's 8,000-byte payload limit); ``<writer>`` is the writing process's ``mfumon.origin`` setting. A
notification is delivered only when its transaction commits. See ``api.state.notify``. SQLite: nothing to do.

Revision ID: 0009_change_notifications
Revises: 0008_node_sample_document
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0009_change_notifications"
down_revision = "0008_node_sample_document"
branch_labels = None
depends_on = None

KEYS = {
    "nodes": "name",
    "jobs": "job_id",
    "baselines": "signature",
    "counters": "name",
    "scheduler_sources": "name",
    "queue_wait_histograms": "pool",
}

FUNCTION = """
CREATE OR REPLACE FUNCTION mfumon_notify_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    writer text := coalesce(current_setting('mfumon.origin', true), '');
    keys text;
BEGIN
    FOR keys IN EXECUTE format(
        'SELECT json_agg(k)::text FROM ('
        '  SELECT k, sum(octet_length(k) + 4) OVER (ORDER BY k) / 7000 AS part'
        '  FROM (SELECT DISTINCT %I::text AS k FROM changed) AS distinct_keys'
        ') AS keyed GROUP BY part',
        TG_ARGV[0])
    LOOP
        PERFORM pg_notify('mfumon_changes', TG_TABLE_NAME || ' ' || writer || ' ' || keys);
    END LOOP;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FUNCTION)
    for table, key in KEYS.items():
        for operation in ("INSERT", "UPDATE"):  # a trigger with a transition table takes one event
            op.execute(
                f"CREATE TRIGGER mfumon_notify_{operation.lower()} AFTER {operation} ON {table} "
                f"REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION mfumon_notify_changed('{key}')"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in KEYS:
        for operation in ("insert", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS mfumon_notify_{operation} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS mfumon_notify_changed()")
