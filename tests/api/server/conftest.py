"""Fixtures of the server tests."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from mfumon.api.core.config import Settings
from mfumon.api.main import create_app
from mfumon.api.server import connection_guard
from tests.api.server._served import TOKENS, Served
from tests.utils.in_process import serve_in_process


@pytest.fixture
def serve(migrated_sqlite: Path, tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start servers as ``mfumon serve`` wires them (tokens from :data:`TOKENS`), each on a database of its own."""
    (tmp_path / "tokens").write_text(TOKENS)
    with ExitStack() as stack:
        count = [0]

        def make(**settings: Any) -> Served:
            count[0] += 1
            database = tmp_path / f"served-{count[0]}.db"
            shutil.copyfile(migrated_sqlite, database)
            settings = {"INGEST_TOKENS_FILE": tmp_path / "tokens", **settings}
            app = create_app(Settings(DATABASE_URL=f"sqlite:///{database}", **settings))
            guard = connection_guard(app, Settings(**settings), 1000)
            port = stack.enter_context(serve_in_process(app, guard))
            return Served(port, app)

        yield make
