"""schemathesis over the whole OpenAPI document, against the real server, on SQLite and PostgreSQL (issues 10, 28).

Coverage (boundary values of every documented constraint), fuzzing and stateful (create, then read, report, end)
phases, with every check schemathesis has (``--checks all``): nothing answers 5xx, every answer is documented with
the schema, headers and content type it claims, data the document admits is taken and data it refuses is refused
(positive_data_acceptance, negative_data_rejection), a 405 lists the path's methods, a write without a token is
401, and a resource just created can be read. No check is left out.

The few rules JSON Schema cannot state (a value against another, against the server's clock, against what is
stored) are stated in words in the document, and ``schemathesis_hooks.py`` keeps positive cases within them (see
its docstring); ``test_openapi_rules.py`` and ``test_strict_types.py`` pin the server's answers to those rules.

This is the bounded run CI makes; ``MFUMON_SCHEMATHESIS_EXAMPLES`` raises the examples per operation.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import start_server

TOKEN = "schemathesis-token"
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")


def _schemathesis() -> str:
    path = Path(sys.executable).with_name("schemathesis")
    if not path.exists():
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    return str(path)


def test_schemathesis_with_every_check_finds_nothing(database_url: str, tmp_path: Path) -> None:
    binary = _schemathesis()
    examples = os.environ.get("MFUMON_SCHEMATHESIS_EXAMPLES", "15")
    with start_server(tmp_path, env={"MFUMON_INGEST_TOKENS": TOKEN}, database_url=database_url) as server:
        cmd = [
            binary,
            "run",
            f"{server.url}/openapi.json",
            "--phases=coverage,fuzzing,stateful",
            "--checks=all",
            f"--header=Authorization: Bearer {TOKEN}",
            f"--max-examples={examples}",
            "--seed=10",
            "--workers=1",
            "--request-timeout=60",
            "--no-color",
            "--no-shrink",
            f"--report-dir={tmp_path / 'report'}",
        ]
        env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=tmp_path, env=env)
        log = server.log()
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
    output = result.stdout + result.stderr
    summary = re.search(r"(\d+) generated, (\d+) (?:passed|found)", output)
    assert summary and int(summary.group(1)) > 100, output[-3000:]
    assert result.returncode == 0, output[-6000:]
    assert summary.group(1) == summary.group(2), output[-3000:]  # every case passed every check
    assert "refused a validated value" not in log  # validation, not the database, turned every bad value away
    assert "Traceback" not in log, log[-3000:]
