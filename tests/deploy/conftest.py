"""Fixtures for the deployment tests: promtool, required in CI and optional on a laptop."""

from __future__ import annotations

import pytest

from tests.deploy._support import require_tool


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_tool("promtool")
