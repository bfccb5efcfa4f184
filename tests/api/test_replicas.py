"""Two ``mfumon serve`` replicas on one PostgreSQL describe the same cluster whichever one a push reached."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import POSTGRES_URL_ENV, start_server
from tests.utils.factories import metric_value, node_sample, report


@pytest.fixture
def shared_postgres() -> Iterator[str]:
    url = os.environ.get(POSTGRES_URL_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_URL_ENV} must be set in CI")
        pytest.skip(f"{POSTGRES_URL_ENV} not set")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    name = f"mfumon_replicas_{uuid.uuid4().hex[:8]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield admin.rsplit("/", 1)[0] + "/" + name
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def _eventually(check, timeout_s: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_push_to_one_replica_read_from_the_other(shared_postgres: str, tmp_path: Path) -> None:
    env = {"MFUMON_REFRESH_INTERVAL_SECONDS": "0.5"}
    with (
        start_server(
            tmp_path / "a" if (tmp_path / "a").mkdir() is None else tmp_path,
            env=env,
            database_url=shared_postgres,
        ) as a,
        start_server(
            tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path,
            env=env,
            database_url=shared_postgres,
        ) as b,
    ):
        assert httpx.post(f"{a.url}/v1/nodes/node-7/samples", json=node_sample(8, job_id="rep")).status_code == 200
        result = httpx.post(f"{a.url}/v1/jobs/rep/reports", json=report(team="infra")).json()
        assert result["mfu"] is not None

        def replica_b_sees_it() -> str | None:
            body = httpx.get(f"{b.url}/metrics").text
            return body if metric_value(body, "mfumon_job_mfu_ratio", job_id="rep") is not None else None

        text_b = _eventually(replica_b_sees_it)
        assert text_b, "replica b never showed the job pushed to replica a"
        assert metric_value(text_b, "mfumon_job_mfu_ratio", job_id="rep") == pytest.approx(result["mfu"])
        assert metric_value(text_b, "mfumon_gpu_info", node="node-7", job_id="rep", gpu="7") == 1
        node = httpx.get(f"{b.url}/v1/nodes/node-7").json()
        assert len(node["gpus"]) == 8
        assert httpx.get(f"{b.url}/v1/jobs/rep").json()["latest"]["mfu"] == pytest.approx(result["mfu"])
        summary_a = httpx.get(f"{a.url}/v1/cluster").json()
        summary_b = httpx.get(f"{b.url}/v1/cluster").json()
        assert summary_a["mfu"] == pytest.approx(summary_b["mfu"])

        # Ending the job on b removes its series from a too.
        assert httpx.post(f"{b.url}/v1/jobs/rep/end").status_code == 200
        gone = _eventually(lambda: 'job_id="rep"' not in httpx.get(f"{a.url}/metrics").text.split("mfumon_gpu_info")[0])
        assert gone
