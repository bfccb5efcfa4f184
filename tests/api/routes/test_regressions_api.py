"""``GET /v1/regressions`` on jobs posted through the API (issue 59): an NCCL upgrade that cost one signature 6 % is
named with its versions, and a driver upgrade that cost nothing is not; bad windows are refused. Both databases."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mfumon.api.services.regressions import refresh_regressions
from tests.utils.clock import Clock
from tests.utils.factories import report

BASE = {"python": "3.11.7", "pytorch": "2.5.1", "nccl": "2.21.5", "driver": "550.54.15"}


def _job(client: TestClient, clock: Clock, job_id: str, tokens_per_second: float, **software: str) -> None:
    assert client.put(f"/v1/jobs/{job_id}", json={"software": {**BASE, **software}}).status_code == 200
    for jitter in (1.0, 1.002, 0.998, 1.001):
        body = report(tokens_per_second=tokens_per_second * jitter, step_seconds=1.0)
        assert client.post(f"/v1/jobs/{job_id}/reports", json=body).status_code == 200, job_id
        clock.advance(10)


def upgrade_fleet(client: TestClient, *, driver_jobs: int = 4) -> Clock:
    """Four jobs on NCCL 2.21.5, four on 2.23.4 at 6 % lower MFU, then `driver_jobs` on 2.23.4 and a new driver at
    the same MFU; one signature (the factories' Llama 7B on 8 H100s)."""
    clock = Clock(client, start=1_800_000_000.0)
    for i in range(4):
        _job(client, clock, f"old-{i}", 25_000.0 * (1 + i / 1000))
    for i in range(4):
        _job(client, clock, f"new-nccl-{i}", 23_500.0 * (1 + i / 1000), nccl="2.23.4")
    for i in range(driver_jobs):
        _job(client, clock, f"new-driver-{i}", 23_500.0 * (1 - i / 1000), nccl="2.23.4", driver="560.35.03")
    return clock


def test_an_nccl_regression_is_found_and_a_harmless_driver_upgrade_is_not(client: TestClient) -> None:
    upgrade_fleet(client)
    body = client.get("/v1/regressions", params={"since": "1d"}).json()
    assert "Welch" in body["method"]
    changes = {c["component"]: c for c in body["changes"]}
    assert set(changes) == {"nccl", "driver"}
    nccl = changes["nccl"]
    assert (nccl["before"], nccl["after"], nccl["verdict"]) == ("2.21.5", "2.23.4", "regression")
    assert nccl["relative_change"] == pytest.approx(-0.06, abs=0.003)
    assert nccl["mfu_after"]["high"] < nccl["mfu_before"]["low"] and nccl["confidence"] > 0.99
    assert sorted(nccl["jobs_before"]) == [f"old-{i}" for i in range(4)]
    # judged on the jobs that kept the old driver: the four on the new driver too are another comparison's
    assert sorted(nccl["jobs_after"]) == [f"new-nccl-{i}" for i in range(4)] and nccl["gpu_hours_after"] > 0
    assert len(nccl["affected_jobs"]) == 8  # the four on the new driver run the new NCCL too
    assert nccl["confounded"] is False
    driver = changes["driver"]  # judged on jobs that all run the new NCCL
    assert driver["verdict"] == "no_change" and not driver["confounded"]
    assert sorted(driver["jobs_before"]) == [f"new-nccl-{i}" for i in range(4)]
    only = client.get("/v1/regressions", params={"since": "1d", "verdict": "regression"}).json()["changes"]
    assert [c["component"] for c in only] == ["nccl"]


@pytest.mark.parametrize("params", [{"since": "yesterday"}, {"since": "1h", "until": "2h"}, {"verdict": "worse"}])
def test_bad_queries_are_refused(client: TestClient, params: dict[str, str]) -> None:
    assert client.get("/v1/regressions", params=params).status_code == 422


def test_the_affected_jobs_get_a_finding_naming_the_change(client: TestClient) -> None:
    upgrade_fleet(client)
    refresh_regressions(client.app.state.ctx)  # type: ignore[attr-defined]  # the maintenance thread's task
    causes = {
        job_id: {f["cause"]: f for f in client.get(f"/v1/jobs/{job_id}/diagnosis").json()["findings"]}
        for job_id in ("old-0", "new-nccl-0", "new-driver-0")
    }
    finding = causes["new-nccl-0"]["software_regression"]
    assert (finding["evidence"]["component"], finding["evidence"]["to_version"]) == ("nccl", "2.23.4")
    assert "software_regression" not in causes["old-0"]  # on the old version: not affected
    # compared on the jobs that kept the old driver, but every job on the new NCCL is affected
    assert causes["new-driver-0"]["software_regression"]["evidence"]["component"] == "nccl"
