"""What a drain cost and saved in GPU-hours (issue 31 #3): on the rows of ``GET /v1/remediations``."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import metric_value, node_sample, scrape


def _decision(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "node": "gpu-node-1",
        "scheduler": "slurm",
        "action": "drain",
        "reason": "xid",
        "outcome": "done",
        "checks": ["xid"],
        "pools": ["train"],
        "timestamp": time.time() - 3600,
    }
    body.update(overrides)
    return body


def _post(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/remediations", json=_decision(**overrides))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _row(client: TestClient, action: str) -> dict[str, Any]:
    return next(r for r in client.get("/v1/remediations").json()["data"] if r["action"] == action)


def test_a_drain_shows_the_jobs_gpu_hours_before_it_and_the_gpu_hours_it_held_out(client: TestClient) -> None:
    sample = node_sample(8, job_id="victim")
    for gpu in sample["gpus"][6:]:  # 6 of 8 GPUs run the job
        del gpu["job_id"]
        gpu.update(utilization=0.0, sm_active=0.0, tensor_active=0.0)
    assert client.post("/v1/nodes/gpu-node-1/samples", json=sample).status_code == 200
    drained_at = time.time() - 3600
    drained = _post(client, timestamp=drained_at, failing_since=drained_at - 600)
    assert (drained["gpus"], drained["gpus_busy"], drained["failing_since"]) == (8, 6, drained_at - 600)
    assert drained["jobs_gpu_hours_before_drain"] == pytest.approx(6 * 600 / 3600)  # 1 GPU-hour
    row = _row(client, "drain")
    assert row["resumed_at"] is None
    assert row["drained_gpu_hours"] == pytest.approx(8.0, abs=0.05)  # out for an hour, 8 GPUs, still out

    resumed_at = drained_at + 1800
    resume = _post(client, action="resume", reason="healthy", checks=[], timestamp=resumed_at)
    assert (resume["gpus"], resume["drained_gpu_hours"], resume["jobs_gpu_hours_before_drain"]) == (None, None, None)
    row = _row(client, "drain")
    assert row["resumed_at"] == resumed_at
    assert row["drained_gpu_hours"] == pytest.approx(8 * 1800 / 3600)  # 4 GPU-hours
    # The same on /metrics, durable: the jobs' GPU-seconds at the drain, the drained ones at the resume.
    text = scrape(client)
    assert metric_value(text, "mfumon_remediation_gpu_seconds_total", category="lost_before_drain") == 6 * 600
    assert metric_value(text, "mfumon_remediation_gpu_seconds_total", category="drained") == 8 * 1800
    _post(client, action="resume", reason="healthy", checks=[], timestamp=resumed_at + 60)  # nothing left open
    assert metric_value(scrape(client), "mfumon_remediation_gpu_seconds_total", category="drained") == 8 * 1800


def test_a_node_the_aggregator_never_saw_has_no_figures_and_a_dry_run_holds_nothing_out(client: TestClient) -> None:
    drained = _post(client, node="ghost-1", failing_since=time.time() - 4000)
    assert (drained["gpus"], drained["jobs_gpu_hours_before_drain"], drained["drained_gpu_hours"]) == (None, None, None)
    assert client.post("/v1/nodes/gpu-node-1/samples", json=node_sample(8, job_id="j")).status_code == 200
    dry = _post(client, outcome="dry_run", failing_since=time.time() - 4200)
    assert dry["jobs_gpu_hours_before_drain"] == pytest.approx(8 * 600 / 3600, rel=0.01)
    assert dry["drained_gpu_hours"] is None


def test_failing_since_after_the_decision_is_a_422_that_stores_nothing(client: TestClient) -> None:
    now = time.time() - 10
    response = client.post("/v1/remediations", json=_decision(timestamp=now, failing_since=now + 1))
    assert response.status_code == 422
    assert "failing_since must not be after timestamp" in response.text
    assert client.get("/v1/remediations").json()["count"] == 0


def test_each_decision_is_counted_per_node_for_mfumon_node_drain(client: TestClient) -> None:
    _post(client, outcome="dry_run")
    _post(client, outcome="dry_run")  # a repeat: one row, two rounds counted
    _post(client, node="gpu-node-2", reason="budget_pool", outcome="withheld")
    text = scrape(client)
    labels = {"action": "drain", "reason": "xid", "outcome": "dry_run"}
    assert metric_value(text, "mfumon_node_remediation_decisions_total", node="gpu-node-1", **labels) == 2
    withheld = {"action": "drain", "reason": "budget_pool", "outcome": "withheld"}
    assert metric_value(text, "mfumon_node_remediation_decisions_total", node="gpu-node-2", **withheld) == 1
    assert metric_value(text, "mfumon_remediation_actions_total", **labels) == 2  # the cluster's counter, unchanged
