"""Apply Alembic migrations programmatically (``mfumon serve`` does this on start).

The one module of the aggregator that imports :mod:`mfumon.migrations`: the schema's facts that the running service
needs (the change-notification channel) are read through here.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

import mfumon.migrations
from mfumon.migrations.change_triggers import CHANNEL as CHANGE_CHANNEL

MIGRATIONS_DIR = Path(mfumon.migrations.__file__).resolve().parent
__all__ = ["CHANGE_CHANNEL", "MIGRATIONS_DIR", "alembic_config", "upgrade_to_head"]

_PG_MIGRATION_LOCK_ID = 0x6D66756D6F6E  # "mfumon": serialises replicas that start at the same moment


def alembic_config(database_url: str) -> Config:
    """An Alembic config without an ini file: script location from the installed package, URL from settings."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the schema to the newest revision; replicas starting together on PostgreSQL take turns."""
    config = alembic_config(database_url)
    if not database_url.startswith("postgresql"):
        command.upgrade(config, "head")
        return
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _PG_MIGRATION_LOCK_ID})
            try:
                config.attributes["connection"] = conn
                command.upgrade(config, "head")
                conn.commit()
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": _PG_MIGRATION_LOCK_ID})
                conn.commit()
    finally:
        engine.dispose()
