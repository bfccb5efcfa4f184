"""No single sample can freeze a node (issue 10 #4).

One push dated far in the future used to make every later real push answer ``applied: false`` while ``last_seen``
stayed fresh: no silence alert, forged values in ``/metrics`` for good. These tests go through HTTP, so they hold
for any implementation of the write path.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from tests.utils.factories import metric_value, node_sample, scrape

SKEW = 60.0


def _push(client: TestClient, node: str, timestamp: float, power: float) -> dict[str, object]:
    response = client.post(
        f"/v1/nodes/{node}/samples", json={**node_sample(2, power_watts=power), "timestamp": timestamp}
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _power(client: TestClient, node: str) -> float | None:
    return metric_value(scrape(client), "mfumon_gpu_power_watts", node=node, gpu="0")


def test_a_timestamp_beyond_the_skew_is_422_naming_timestamp(make_client) -> None:  # type: ignore[no-untyped-def]
    client: TestClient = make_client(MAX_CLOCK_SKEW_SECONDS=SKEW)
    _push(client, "victim", time.time(), 500.0)
    for forged in (99_000_000_000.0, time.time() + SKEW + 30):
        response = client.post(
            "/v1/nodes/victim/samples", json={**node_sample(2, power_watts=1.0), "timestamp": forged}
        )
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]
        assert [d["field"] for d in detail] == ["timestamp"] and "MFUMON_MAX_CLOCK_SKEW_SECONDS" in detail[0]["msg"]
    assert _power(client, "victim") == 500.0  # nothing changed
    assert client.get("/v1/nodes/victim").json()["samples_received"] == 1
    text = scrape(client)
    assert 'mfumon_ingest_requests_total{endpoint="node_samples",outcome="invalid"} 2' in text


def test_a_future_sample_within_the_skew_does_not_outrank_the_real_ones(make_client) -> None:  # type: ignore[no-untyped-def]
    client: TestClient = make_client(MAX_CLOCK_SKEW_SECONDS=SKEW)
    _push(client, "victim", time.time(), 500.0)
    assert _push(client, "victim", time.time() + SKEW - 1, 1.0)["applied"] is True  # a fast clock, or forged
    assert _power(client, "victim") == 1.0
    # The node's real exporter keeps pushing: its very next sample is applied, and so are the ones after it.
    for power in (510.0, 520.0, 530.0):
        assert _push(client, "victim", time.time(), power)["applied"] is True
        assert _power(client, "victim") == power
    node = client.get("/v1/nodes/victim").json()
    assert node["last_timestamp"] <= time.time()  # the stored "newest" never lies in the future


def test_a_node_whose_clock_runs_ahead_keeps_reporting(make_client) -> None:  # type: ignore[no-untyped-def]
    client: TestClient = make_client(MAX_CLOCK_SKEW_SECONDS=SKEW)
    for power in (400.0, 410.0, 420.0):
        assert _push(client, "fast-clock", time.time() + 20, power)["applied"] is True
        assert _power(client, "fast-clock") == power


def test_a_spool_replay_still_does_not_overwrite_newer_state(client: TestClient) -> None:
    now = time.time()
    _push(client, "replay", now, 600.0)
    assert _push(client, "replay", now - 120, 1.0)["applied"] is False  # an old batch arriving late
    assert _power(client, "replay") == 600.0
    assert client.get("/v1/nodes/replay").json()["samples_received"] == 2


def _sync(client: TestClient, observed_at: float, job_ids: list[str]) -> Any:
    jobs = [{"job_id": j, "status": "pending", "gpus_requested": 8, "pool": "train"} for j in job_ids]
    return client.put("/v1/scheduler/slurm", json={"kind": "slurm", "observed_at": observed_at, "jobs": jobs})


def test_a_scheduler_snapshot_from_the_future_cannot_freeze_the_source(make_client) -> None:  # type: ignore[no-untyped-def]
    """The same rule for ``mfumon scheduler``: snapshots older than the last applied one are ignored."""
    client: TestClient = make_client(MAX_CLOCK_SKEW_SECONDS=SKEW)
    response = _sync(client, 99_000_000_000.0, ["forged"])
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "observed_at"
    assert _sync(client, time.time() + SKEW - 1, ["forged"]).json()["applied"] is True
    real = _sync(client, time.time(), ["real-1", "real-2"]).json()  # the adapter's next real snapshot
    assert real["applied"] is True and real["ended"] == 1
    assert client.get("/v1/jobs/forged").json()["status"] == "ended"
