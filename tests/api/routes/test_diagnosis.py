"""GET /v1/jobs/{job_id}/diagnosis: the waterfall and ranked findings of running and ended jobs, on both databases."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.clock import Clock
from tests.utils.factories import gpu, ib_port, report

COMM_HEAVY = {"step_seconds": 2.0, "data_wait_seconds": 0.05, "comm_seconds": 0.8}


def _report(client: TestClient, job_id: str, **overrides: Any) -> None:
    body = {**report(num_gpus=8), "tokens": 750_000, "interval_seconds": 30.0, **overrides}
    del body["tokens_per_second"]
    response = client.post(f"/v1/jobs/{job_id}/reports", json=body)
    assert response.status_code == 200, response.text


def _causes(body: dict[str, Any]) -> list[str]:
    return [f["cause"] for f in body["findings"]]


def test_unknown_job_is_404(client: TestClient) -> None:
    response = client.get("/v1/jobs/nobody/diagnosis")
    assert response.status_code == 404
    assert "nobody" in response.json()["detail"]


def test_a_running_job_gets_its_waterfall_and_ranked_findings(client: TestClient) -> None:
    clock = Clock(client)
    client.post("/v1/jobs/comm/events", json={"type": "init", "seconds": 30})
    _report(client, "comm", **COMM_HEAVY)
    for _ in range(3):
        clock.advance(30)
        _report(client, "comm", **COMM_HEAVY)
    clock.advance(30)
    client.post("/v1/jobs/comm/events", json={"type": "checkpoint_save", "seconds": 20, "step": 10})
    _report(client, "comm", **COMM_HEAVY)
    body = client.get("/v1/jobs/comm/diagnosis").json()
    job = client.get("/v1/jobs/comm").json()
    assert body["total_gpu_seconds"] == pytest.approx(job["total_gpu_seconds"])
    assert body["waterfall"] == job["waterfall"]
    assert sum(row["gpu_seconds"] for row in body["waterfall"]) == pytest.approx(body["total_gpu_seconds"])
    causes = _causes(body)
    # 8 GPUs x 180 s: exposed communication 40% of 130 s of steps > start-up 30 s > the checkpoint's 20 s
    assert causes[:3] == ["exposed_communication", "slow_startup", "checkpoint_overhead"]
    assert "data_loading" not in causes  # 2.5% of step time
    stakes = [f["gpu_seconds"] for f in body["findings"]]
    assert stakes == sorted(stakes, reverse=True)
    comm = body["findings"][0]
    waterfall = {row["category"]: row["gpu_seconds"] for row in body["waterfall"]}
    assert comm["gpu_seconds"] == pytest.approx(waterfall["comm_exposed"])
    assert comm["evidence"]["share_of_step_time"] == pytest.approx(0.4)
    assert comm["share_of_allocated"] == pytest.approx(waterfall["comm_exposed"] / body["total_gpu_seconds"])
    assert "overlap" in comm["advice"].lower()


def test_a_straggler_is_named_and_a_failing_link_makes_it_a_slow_link(client: TestClient) -> None:
    clock = Clock(client)
    fast = [gpu(i, job_id="strag", tensor_active=0.3, sm_active=0.8) for i in range(4)]
    slow = [gpu(i, job_id="strag", tensor_active=0.3, sm_active=0.8) for i in range(3)]
    slow.append(gpu(3, job_id="strag", uuid="GPU-slow", tensor_active=0.6, sm_active=0.9))
    ports = [ib_port(), ib_port("mlx5_1", state="DOWN", phys_state="Polling")]
    for name, gpus, node_ports in (("a", fast, [ib_port()]), ("b", slow, ports)):
        body = {"timestamp": clock.now, "pool": "train", "gpus": gpus, "ib_ports": node_ports}
        assert client.post(f"/v1/nodes/{name}/samples", json=body).status_code == 200
    _report(client, "strag", step_seconds=1.0)
    clock.advance(30)
    _report(client, "strag", step_seconds=1.0)
    body = client.get("/v1/jobs/strag/diagnosis").json()
    (finding,) = [f for f in body["findings"] if f["cause"] == "stragglers"]
    assert finding["evidence"]["tensor_active_spread"] == pytest.approx(0.5)
    assert finding["evidence"]["slowest_nodes"] == ["b"]
    (slowest,) = finding["evidence"]["slowest_gpus"]
    assert (slowest["node"], slowest["gpu"], slowest["uuid"]) == ("b", 3, "GPU-slow")
    assert slowest["verdict"] == "slow link" and slowest["because"] == ["ib_ports_active"]
    assert finding["gpu_seconds"] > 0

    # The same job on healthy links: a slow rank.
    ok = {"timestamp": clock.now, "pool": "train", "gpus": slow, "ib_ports": [ib_port(), ib_port("mlx5_1")]}
    assert client.post("/v1/nodes/b/samples", json=ok).status_code == 200
    body = client.get("/v1/jobs/strag/diagnosis").json()
    (finding,) = [f for f in body["findings"] if f["cause"] == "stragglers"]
    assert finding["evidence"]["slowest_gpus"][0]["verdict"] == "slow rank"


def test_an_even_job_has_no_straggler(client: TestClient) -> None:
    clock = Clock(client)
    gpus = [gpu(i, job_id="even", tensor_active=0.45) for i in range(8)]
    assert client.post("/v1/nodes/a/samples", json={"timestamp": clock.now, "gpus": gpus}).status_code == 200
    _report(client, "even", step_seconds=1.0)
    assert "stragglers" not in _causes(client.get("/v1/jobs/even/diagnosis").json())


def test_an_ended_job_is_diagnosed_from_its_summary(client: TestClient) -> None:
    clock = Clock(client)
    for attempt in range(2):
        _report(client, "crashy", step=100 * attempt, step_seconds=1.0)
        clock.advance(30)
        _report(client, "crashy", step=100 * attempt + 30, step_seconds=1.0)
        clock.advance(5)
        client.post("/v1/jobs/crashy/events", json={"type": "failure", "exit_code": 137 - attempt})
        client.post("/v1/jobs/crashy/end")
        clock.advance(60)
    job = client.get("/v1/jobs/crashy").json()
    assert job["status"] == "ended" and job["failures"] == 2
    body = client.get("/v1/jobs/crashy/diagnosis").json()
    assert body["status"] == "ended"
    assert body["waterfall"] == job["summary"]["waterfall"]
    assert body["total_gpu_seconds"] == pytest.approx(job["summary"]["total_gpu_seconds"])
    (finding,) = [f for f in body["findings"] if f["cause"] == "repeated_failures"]
    assert finding["evidence"]["failures"] == 2 and finding["evidence"]["exit_codes"] == [137, 136]
    assert finding["evidence"]["lost_gpu_seconds"] > 0


def test_a_job_that_never_reported_has_an_empty_diagnosis(client: TestClient) -> None:
    assert client.put("/v1/jobs/queued", json={"name": "later"}).status_code == 200
    body = client.get("/v1/jobs/queued/diagnosis").json()
    assert body["total_gpu_seconds"] == 0 and body["findings"] == []
    assert [row["gpu_seconds"] for row in body["waterfall"]] == [0.0] * len(body["waterfall"])
