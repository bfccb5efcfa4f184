"""Alembic environment: the URL comes from the caller (``mfumon.api.db.migrate``) or from MFUMON_DATABASE_URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from mfumon.api.core.config import Settings
from mfumon.api.db.tables import Base

config = context.config
url = config.get_main_option("sqlalchemy.url") or Settings().DATABASE_URL
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config({"sqlalchemy.url": url}, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
