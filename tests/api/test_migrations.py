"""The schema comes from Alembic and matches the models; migrations go down and up again."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from api.db.migrate import alembic_config, upgrade_to_head
from api.db.models import Base


def test_migrations_create_exactly_the_models(database_url: str) -> None:
    upgrade_to_head(database_url)
    upgrade_to_head(database_url)  # idempotent: a second replica starting finds nothing to do
    engine = create_engine(database_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []
    command.downgrade(alembic_config(database_url), "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade_to_head(database_url)
    assert {"nodes", "gpus", "jobs", "job_reports", "baselines"} <= set(inspect(engine).get_table_names())
    engine.dispose()
