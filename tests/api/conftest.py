"""Aggregator fixtures: every storage/API test runs on SQLite and, when configured, on a real PostgreSQL."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from mfumon.api.core.config import Settings
from mfumon.api.db.migrate import upgrade_to_head
from mfumon.api.main import create_app
from tests.conftest import POSTGRES_URL_ENV


def _admin_url() -> str | None:
    url = os.environ.get(POSTGRES_URL_ENV)
    if not url:
        return None
    return url.rsplit("/", 1)[0] + "/postgres"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a new database on the test PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    admin = _admin_url()
    if admin is None:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_URL_ENV} must be set in CI (.ci/run starts PostgreSQL)")
        pytest.skip(f"{POSTGRES_URL_ENV} not set")
    name = f"mfumon_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file the real migrations brought to head once per session, copied for each app on SQLite: a copy
    takes 1 ms where the migrations take 130. The migrations themselves are tested in ``tests/api/db``, and every
    PostgreSQL test migrates its own new database."""
    path = tmp_path_factory.mktemp("template") / "migrated.db"
    upgrade_to_head(f"sqlite:///{path}")
    return path


@pytest.fixture
def make_client(database_url: str, migrated_sqlite: Path) -> Iterator[Callable[..., TestClient]]:
    """Build a started app (migrations applied) on the test database with the given settings."""
    clients: list[TestClient] = []
    target = Path(database_url.removeprefix("sqlite:///")) if database_url.startswith("sqlite:///") else None
    if target is not None and not target.exists():  # a database the test has not written itself
        shutil.copyfile(migrated_sqlite, target)

    def make(**settings: Any) -> TestClient:
        app = create_app(Settings(DATABASE_URL=database_url, **settings))
        client = TestClient(app)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()
