"""``PUT /v1/scheduler/{source}``: a scheduler's snapshot keeps jobs in step, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import metric_value, node_sample, report, scrape


def _job(job_id: str, status: str = "pending", gpus: int = 8, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"job_id": job_id, "status": status, "gpus_requested": gpus, "pool": "train"}
    body.update(extra)
    return body


def _sync(client: TestClient, jobs: list[dict[str, Any]], source: str = "slurm", **extra: Any) -> dict[str, Any]:
    body = {"kind": "slurm", "observed_at": extra.pop("observed_at", time.time()), "jobs": jobs, **extra}
    response = client.put(f"/v1/scheduler/{source}", json=body)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_sync_registers_starts_requeues_and_ends_jobs(client: TestClient) -> None:
    # Pools are those of the nodes exporters report: one 8-GPU node in "train", nothing attributed.
    assert client.post("/v1/nodes/n1/samples", json=node_sample(8, pool="train", tensor_active=0.0)).status_code == 200
    now = time.time()
    queued = {"submitted_at": now - 600, "queued_at": now - 500, "team": "research"}
    result = _sync(client, [_job("100", **queued, pending_reason="Resources"), _job("101", gpus=2, team="research")])
    assert (result["created"], result["ended"]) == (2, 0)
    job = client.get("/v1/jobs/100").json()
    assert (job["status"], job["source"], job["pending_reason"], job["gpus_allocated"]) == (
        "pending",
        "slurm",
        "Resources",
        0,
    )
    text = scrape(client)
    assert metric_value(text, "mfumon_job_queue_wait_seconds", job_id="100") == pytest.approx(500, abs=5)
    assert metric_value(text, "mfumon_job_queue_wait_seconds", job_id="101") is None  # not eligible: held
    assert metric_value(text, "mfumon_pool_gpus_queued", pool="train") == 8
    assert metric_value(text, "mfumon_scheduler_jobs", source="slurm", status="held") == 1

    started = {**queued, "started_at": now - 100, "gpus_allocated": 8, "placement": {"n1": 8}}
    result = _sync(client, [_job("100", "running", **started)])
    assert (result["started"], result["ended"]) == (1, 1)  # 101 left the scheduler
    assert client.get("/v1/jobs/101").json()["status"] == "ended"
    text = scrape(client)
    labels = {"pool": "train", "team": "research"}
    assert metric_value(text, "mfumon_started_job_queue_wait_seconds_count", **labels) == 1
    assert metric_value(text, "mfumon_started_job_queue_wait_seconds_sum", **labels) == pytest.approx(400)
    assert metric_value(text, "mfumon_started_job_queue_wait_seconds_bucket", le="300", **labels) == 0
    assert metric_value(text, "mfumon_started_job_queue_wait_seconds_bucket", le="900", **labels) == 1
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="100") == 8  # the scheduler's allocation
    assert metric_value(text, "mfumon_pool_resource_satisfaction_ratio", pool="train") == 1

    # Same snapshot again: nothing changes, the wait is not counted twice.
    assert _sync(client, [_job("100", "running", **started)])["updated"] == 0
    # Requeue: same id, pending again, restart counted; then it ends with the scheduler's state.
    result = _sync(client, [_job("100", "pending", **queued, restarts=1)])
    assert result["requeued"] == 1
    job = client.get("/v1/jobs/100").json()
    assert (job["status"], job["restarts"], job["started_at"]) == ("pending", 1, None)
    _sync(client, [], ended=[{"job_id": "100", "state": "FAILED", "exit_code": 3}])
    job = client.get("/v1/jobs/100").json()
    assert (job["status"], job["end_state"], job["exit_code"]) == ("ended", "FAILED", 3)
    assert metric_value(scrape(client), "mfumon_job_gpus_requested", job_id="100") is None


def test_a_reporting_job_is_adopted_and_keeps_its_report(client: TestClient) -> None:
    assert client.post("/v1/jobs/200/reports", json=report()).status_code == 200
    _sync(client, [_job("200", "running", gpus=8, started_at=time.time() - 60, team="foundation")])
    job = client.get("/v1/jobs/200").json()
    assert (job["source"], job["team"], job["latest"]["mfu"] is not None) == ("slurm", "foundation", True)


def test_stale_snapshot_is_ignored(client: TestClient) -> None:
    now = time.time()
    _sync(client, [_job("300")], observed_at=now)
    result = _sync(client, [], observed_at=now - 30)
    assert result["applied"] is False
    assert client.get("/v1/jobs/300").json()["status"] == "pending"


def test_quotas_and_use(client: TestClient) -> None:
    quotas = [{"team": "research", "pool": "train", "gpus": 16}, {"team": "research", "gpus": 32}]
    _sync(client, [_job("400", "running", gpus=8, team="research", started_at=time.time())], quotas=quotas)
    text = scrape(client)
    assert metric_value(text, "mfumon_team_gpu_quota", team="research", pool="train") == 16
    assert metric_value(text, "mfumon_team_gpu_quota_used_ratio", team="research", pool="train") == 0.5
    assert metric_value(text, "mfumon_team_gpu_quota_used_ratio", team="research", pool="") == 0.25
    assert client.get("/v1/scheduler").json()["data"][0]["quotas"][0]["gpus"] == 16


def test_fragmentation_from_exporters_and_scheduler_placement(client: TestClient) -> None:
    # Two 8-GPU nodes; a running job holds 5 GPUs on each (scheduler placement, no exporter attribution yet).
    for node in ("n1", "n2"):
        assert client.post(f"/v1/nodes/{node}/samples", json=node_sample(8, pool="train")).status_code == 200
    running = _job("500", "running", gpus=10, placement={"n1": 5, "n2": 5}, started_at=time.time())
    now = time.time()
    pending = _job("501", gpus=4, units=[[4, 1]], queued_at=now - 60)
    spread = _job("502", gpus=4, queued_at=now - 60)  # may spread over nodes: never fragmented
    _sync(client, [running, pending, spread])
    text = scrape(client)
    assert metric_value(text, "mfumon_pool_free_gpus", pool="train") == 6
    assert metric_value(text, "mfumon_pool_nodes_by_free_gpus", pool="train", free="3") == 2
    assert metric_value(text, "mfumon_pool_nodes_by_free_gpus", pool="train", free="0") == 0
    assert metric_value(text, "mfumon_pool_largest_free_block_gpus", pool="train") == 3
    assert metric_value(text, "mfumon_pool_fragmented_gpus", pool="train") == 4


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "slurm", "observed_at": 1, "jobs": [{"job_id": "x y", "status": "pending", "gpus_requested": 1}]},
        {"kind": "slurm", "observed_at": 1, "jobs": [{"job_id": "a", "status": "done", "gpus_requested": 1}]},
        {"kind": "slurm", "observed_at": 1, "jobs": [{"job_id": "a", "status": "pending", "gpus_requested": 0}]},
        {
            "kind": "slurm",
            "observed_at": 1,
            "jobs": [{"job_id": "a", "status": "pending", "gpus_requested": 4, "units": [[3, 1]]}],
        },
        {
            "kind": "slurm",
            "observed_at": 1,
            "jobs": [{"job_id": "a", "status": "pending", "gpus_requested": 4, "placement": {"n": 4}}],
        },
        {"kind": "slurm", "observed_at": 1, "jobs": [_job("a"), _job("a")]},
        {"kind": "slurm", "observed_at": float("nan"), "jobs": []},
        {"kind": "Slurm!", "observed_at": 1, "jobs": []},
        {"kind": "slurm", "observed_at": 1, "jobs": [], "quotas": [{"team": "t", "gpus": -1}]},
    ],
)
def test_bad_sync_is_rejected_and_changes_nothing(client: TestClient, body: dict[str, Any]) -> None:
    response = client.put("/v1/scheduler/slurm", content=_json(body), headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert client.get("/v1/jobs").json()["count"] == 0
    assert client.get("/v1/scheduler").json()["count"] == 0


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body)


def test_sync_needs_a_token_when_configured(make_client: Callable[..., TestClient]) -> None:
    client = make_client(INGEST_TOKENS="s3cret")
    body = {"kind": "slurm", "observed_at": time.time(), "jobs": [_job("1")]}
    assert client.put("/v1/scheduler/slurm", json=body).status_code == 401
    ok = client.put("/v1/scheduler/slurm", json=body, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


def test_concurrent_syncs_and_reports_on_new_ids(make_client: Callable[..., TestClient]) -> None:
    """Two adapters of one source and a job's own reports race on the same new ids: no error, one wait counted."""
    client = make_client()
    now = time.time()
    jobs = [_job(f"j{i}", "running", gpus=1, started_at=now, queued_at=now - 120, team="t") for i in range(20)]
    errors: list[str] = []

    def syncer(offset: float) -> None:
        for k in range(3):
            body = {"kind": "slurm", "observed_at": now + offset + k, "jobs": jobs}
            response = client.put("/v1/scheduler/slurm", json=body)
            if response.status_code not in (200, 503):
                errors.append(response.text)

    def reporter() -> None:
        for i in range(20):
            response = client.post(f"/v1/jobs/j{i}/reports", json=report(num_gpus=1))
            if response.status_code not in (200, 503):
                errors.append(response.text)

    threads = [threading.Thread(target=syncer, args=(o,)) for o in (0.0, 0.5)] + [threading.Thread(target=reporter)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    listed = client.get("/v1/jobs", params={"status": "running"}).json()
    assert listed["count"] == 20 and {j["source"] for j in listed["data"]} == {"slurm"}
    count = metric_value(scrape(client), "mfumon_started_job_queue_wait_seconds_count", pool="train", team="t")
    assert count is not None and count <= 20
