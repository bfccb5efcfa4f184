"""An empty diagnosis says why, and a job seen only through its GPUs gets the findings the hardware supports
(issue 30 #5). Both used to answer ``findings: []`` and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.clock import Clock
from tests.utils.factories import gpu, report


def _push(client: TestClient, clock: Clock, node: str, gpus: list[dict[str, Any]]) -> None:
    body = {"timestamp": clock.now, "pool": "train", "gpus": gpus}
    assert client.post(f"/v1/nodes/{node}/samples", json=body).status_code == 200


def _diagnosis(client: TestClient, job_id: str) -> dict[str, Any]:
    answer = client.get(f"/v1/jobs/{job_id}/diagnosis")
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _causes(body: dict[str, Any]) -> list[str]:
    return [f["cause"] for f in body["findings"]]


def test_a_registered_job_without_reports_or_gpus_says_so(client: TestClient) -> None:
    assert client.put("/v1/jobs/queued", json={"name": "later", "gpus_requested": 8}).status_code == 200
    body = _diagnosis(client, "queued")
    assert body["findings"] == [] and body["reports_received"] == 0
    assert body["reason_code"] == "no_reports"
    assert "mfumon wrap" in body["reason"] and "mfumon exporter" in body["reason"]


def test_a_job_that_ended_before_its_first_report_says_so(client: TestClient) -> None:
    assert client.put("/v1/jobs/blink", json={"name": "short"}).status_code == 200
    assert client.post("/v1/jobs/blink/end", json={"exit_code": 0}).status_code == 200
    body = _diagnosis(client, "blink")
    assert body["findings"] == [] and body["reason_code"] == "ended_before_first_interval"


def test_one_report_is_too_short_to_tell(client: TestClient) -> None:
    assert client.post("/v1/jobs/llama-7b-run1/reports", json=report()).status_code == 200
    body = _diagnosis(client, "llama-7b-run1")  # the README's example job, after its one example report
    assert body["findings"] == [] and body["reports_received"] == 1
    assert body["reason_code"] == "too_short" and "2" in body["reason"]


def test_a_healthy_job_says_nothing_passed_a_threshold(client: TestClient) -> None:
    clock = Clock(client)
    for _ in range(3):
        assert client.post("/v1/jobs/fine/reports", json=report(step_seconds=1.0)).status_code == 200
        clock.advance(30)
    body = _diagnosis(client, "fine")
    assert body["findings"] == [] and body["reason_code"] == "nothing_found"


def test_findings_come_without_a_reason(client: TestClient) -> None:
    clock = Clock(client)
    for _ in range(3):
        body = report(step_seconds=1.0, comm_seconds=0.5)
        assert client.post("/v1/jobs/chatty/reports", json=body).status_code == 200
        clock.advance(30)
    body = _diagnosis(client, "chatty")
    assert "exposed_communication" in _causes(body)
    assert body["reason_code"] is None and body["reason"] is None


@pytest.mark.parametrize("registered", [True, False])
def test_busy_gpus_of_a_job_that_never_reports_get_the_hardware_findings(client: TestClient, registered: bool) -> None:
    """Busy GPUs, tensor pipes mostly idle, one GPU throttled and slow: every finding the counters support."""
    clock = Clock(client)
    if registered:
        assert client.put("/v1/jobs/silent", json={"name": "unwrapped"}).status_code == 200
    gpus = [gpu(i, job_id="silent", sm_active=0.9, tensor_active=0.2) for i in range(7)]
    hot = {"tensor_active": 0.1, "sm_clock_hz": 1.2e9, "max_sm_clock_hz": 1.98e9, "throttle_reasons": ["hw_thermal"]}
    gpus.append(gpu(7, job_id="silent", sm_active=0.9, **hot))
    _push(client, clock, "n1", gpus)
    body = _diagnosis(client, "silent")
    causes = _causes(body)
    assert {"busy_without_reporting", "tensor_cores_idle", "throttling", "stragglers"} <= set(causes), causes
    busy = body["findings"][causes.index("busy_without_reporting")]
    assert busy["evidence"]["gpus"] == 8 and busy["evidence"]["nodes"] == ["n1"]
    assert "mfumon wrap" in busy["advice"]
    assert body["reason_code"] is None and body["reports_received"] == 0


def test_idle_gpus_of_a_job_that_never_reports_say_why_there_is_nothing(client: TestClient) -> None:
    clock = Clock(client)
    assert client.put("/v1/jobs/idle", json={"name": "idle"}).status_code == 200
    _push(
        client,
        clock,
        "n2",
        [gpu(i, job_id="idle", utilization=0.0, sm_active=0.0, tensor_active=0.0) for i in range(2)],
    )
    body = _diagnosis(client, "idle")
    assert body["findings"] == [] and body["reason_code"] == "no_reports" and "2 GPU(s)" in body["reason"]


def test_an_id_nobody_registers_or_attributes_is_still_404(client: TestClient) -> None:
    assert client.get("/v1/jobs/nobody/diagnosis").status_code == 404
