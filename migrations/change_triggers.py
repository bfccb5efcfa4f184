"""The PostgreSQL triggers that tell replicas which rows changed, for migrations to add to a table in one line.

A table every replica mirrors in memory needs, besides its entry in ``mfumon.api.state.notify.MIRRORED`` and a reader in
``mfumon.api.state.refresh.Refresher``, these triggers: in the migration that creates the table (or starts mirroring
it), ``create_change_triggers("my_table", "key_column")`` in ``upgrade()`` and ``drop_change_triggers("my_table")`` in
``downgrade()``. The trigger function itself comes with ``0010_change_notifications``. On SQLite both do nothing.

For every statement that inserts or updates the table, the function sends ``<table> <writer> <JSON list of keys>``
on channel ``mfumon_changes`` (several notifications when the keys would pass PostgreSQL's 8,000-byte payload
limit); ``<writer>`` is the writing process's ``mfumon.origin`` setting. A notification is delivered only when its
transaction commits, so every write path is covered without a line of its own.
"""

from __future__ import annotations

from alembic import op

CHANNEL = "mfumon_changes"

FUNCTION = f"""
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
        PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME || ' ' || writer || ' ' || keys);
    END LOOP;
    RETURN NULL;
END
$$
"""

_OPERATIONS = ("insert", "update")  # a trigger with a transition table takes one event


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def create_change_triggers(table: str, key: str) -> None:
    """Notify replicas of the ``key`` values of the rows each statement inserts or updates in ``table``."""
    if not _postgres():
        return
    for operation in _OPERATIONS:
        op.execute(
            f"CREATE TRIGGER mfumon_notify_{operation} AFTER {operation.upper()} ON {table} "
            f"REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION mfumon_notify_changed('{key}')"
        )


def drop_change_triggers(table: str) -> None:
    if not _postgres():
        return
    for operation in _OPERATIONS:
        op.execute(f"DROP TRIGGER IF EXISTS mfumon_notify_{operation} ON {table}")
