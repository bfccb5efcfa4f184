"""Serving jobs through the API: SLO goodput from the engines' latency histograms, the serving waterfall, and bad
histograms refused, on both databases."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.routes.test_inference import serving_report
from tests.utils.clock import Clock
from tests.utils.factories import metric_value, scrape

# vLLM's default buckets (v1/metrics/loggers.py): TTFT and per-request TPOT.
TTFT_LE = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0]
TPOT_LE = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]


def histogram(le: list[float], within: dict[float, int], count: int, total: float = 0.0) -> dict[str, Any]:
    """Cumulative counts from ``within`` (edge -> observations at most that edge; edges between keep the last)."""
    counts, running = [], 0
    for edge in le:
        running = within.get(edge, running)
        counts.append(running)
    return {"le": le, "counts": counts, "count": count, "sum": total}


def report_with(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "engine": "vllm",
        "requests_finished": 100,
        # 100 requests: 95 first tokens within 1.0 s; 90 within TPOT 0.1 s, 96 within 0.15 s
        "ttft_histogram": histogram(TTFT_LE, {0.5: 60, 1.0: 95, 2.5: 100}, 100, 55.0),
        "tpot_histogram": histogram(TPOT_LE, {0.05: 40, 0.1: 90, 0.15: 96, 0.3: 100}, 100, 8.0),
    }
    return serving_report(**{**fields, **overrides})


def test_goodput_from_histograms_default_targets(client: TestClient) -> None:
    response = client.post("/v1/jobs/serve-a/reports", json=report_with())
    assert response.status_code == 200, response.text
    job = client.get("/v1/jobs/serve-a").json()
    good = job["serving"]["slo_goodput"]
    # targets 1.0 s and 0.1 s are bucket edges: marginals exact, 0.95 and 0.90; both: [0.85, 0.90]
    assert good["ttft_met_ratio"] == [0.95, 0.95]
    assert good["tpot_met_ratio"] == [0.9, 0.9]
    assert good["ratio"] == pytest.approx(0.85)
    assert good["upper_ratio"] == pytest.approx(0.9)
    assert job["slo_goodput_ratio"] == pytest.approx(0.85)
    assert job["serving"]["slo"]["source"] == {
        "ttft_seconds": "default",
        "tpot_seconds": "default",
        "objective_ratio": "default",
    }
    text = scrape(client)
    labels = {"job_id": "serve-a", "kind": "inference"}
    assert metric_value(text, "mfumon_job_slo_goodput_ratio", **labels) == pytest.approx(0.85)


def test_target_between_edges_gives_bounds(client: TestClient) -> None:
    client.put("/v1/jobs/serve-b", json={"kind": "inference", "slo": {"tpot_seconds": 0.12}})
    client.post("/v1/jobs/serve-b/reports", json=report_with())
    good = client.get("/v1/jobs/serve-b").json()["serving"]["slo_goodput"]
    assert good["tpot_met_ratio"] == [0.9, 0.96]  # 0.12 s lies in the (0.1, 0.15] bucket
    assert good["ratio"] == pytest.approx(0.85) and good["upper_ratio"] == pytest.approx(0.95)


@pytest.mark.parametrize(
    "bad",
    [
        {"le": [0.1, 0.05], "counts": [1, 2], "count": 2, "sum": 0.1},
        {"le": [0.1, 0.2], "counts": [3, 2], "count": 3, "sum": 0.1},
        {"le": [0.1, 0.2], "counts": [1, 2], "count": 1, "sum": 0.1},
        {"le": [0.1], "counts": [1, 2], "count": 2, "sum": 0.1},
        {"le": [-1.0], "counts": [1], "count": 1, "sum": 0.1},
    ],
)
def test_bad_histogram_is_refused_and_changes_nothing(client: TestClient, bad: dict[str, Any]) -> None:
    response = client.post("/v1/jobs/serve-c/reports", json=report_with(ttft_histogram=bad))
    assert response.status_code == 422, response.text
    assert client.get("/v1/jobs/serve-c").status_code == 404


def test_serving_waterfall_adds_up_and_counts_an_empty_engine_as_idle(client: TestClient) -> None:
    clock = Clock(client, start=1_800_000_000.0)
    assert client.post("/v1/jobs/serve-w/reports", json=report_with()).status_code == 200
    clock.advance(10)
    assert client.post("/v1/jobs/serve-w/reports", json=report_with()).status_code == 200
    clock.advance(10)
    quiet = report_with(decode_tokens=0, requests_running=0, requests_waiting=0, requests_finished=0)
    quiet.pop("ttft_histogram"), quiet.pop("tpot_histogram")
    assert client.post("/v1/jobs/serve-w/reports", json=quiet).status_code == 200
    clock.advance(10)
    stuck = report_with(decode_tokens=0, requests_running=4, requests_waiting=9, requests_finished=0)
    stuck.pop("ttft_histogram"), stuck.pop("tpot_histogram")
    assert client.post("/v1/jobs/serve-w/reports", json=stuck).status_code == 200
    job = client.get("/v1/jobs/serve-w").json()
    serving = {e["category"]: e["gpu_seconds"] for e in job["serving_waterfall"]}
    assert sum(serving.values()) == pytest.approx(job["total_gpu_seconds"])
    assert job["total_gpu_seconds"] == pytest.approx(4 * 10 * 8)  # four 10-s tiles on 8 GPUs
    assert serving["idle"] == pytest.approx(80.0)  # the quiet tile: nobody asked
    assert serving["down"] == pytest.approx(80.0)  # the stuck tile: requests and no token
    assert serving["decode"] == pytest.approx(160.0)  # decode only (prefill_tokens 0)
    training = {e["category"]: e["gpu_seconds"] for e in job["waterfall"]}
    assert training["stalled"] == pytest.approx(160.0)  # the training waterfall is unchanged
    text = scrape(client)
    for category, seconds in serving.items():
        labels = {"job_id": "serve-w", "kind": "inference", "category": category}
        assert metric_value(text, "mfumon_job_serving_gpu_seconds_total", **labels) == pytest.approx(seconds)


def test_a_server_that_fails_loses_no_work_to_redo(client: TestClient) -> None:
    clock = Clock(client, start=1_800_000_000.0)
    for _ in range(3):
        assert client.post("/v1/jobs/serve-f/reports", json=report_with()).status_code == 200
        clock.advance(10)
    assert client.post("/v1/jobs/serve-f/events", json={"type": "failure", "exit_code": 1}).status_code == 200
    assert client.post("/v1/jobs/serve-f/events", json={"type": "restart"}).status_code == 200
    for _ in range(3):
        clock.advance(10)
        assert client.post("/v1/jobs/serve-f/reports", json=report_with()).status_code == 200
    job = client.get("/v1/jobs/serve-f").json()
    training = {e["category"]: e["gpu_seconds"] for e in job["waterfall"]}
    assert training["lost"] == 0  # served requests are not redone, unlike training steps since a checkpoint
    assert job["failures"] == 1


def test_a_serving_job_without_phases_is_busy_not_down(client: TestClient) -> None:
    clock = Clock(client, start=1_800_000_000.0)
    body = {"kind": "inference", "tokens_per_second": 2000.0, "num_gpus": 8, "gpu_model": "NVIDIA H100 80GB HBM3"}
    body["model"] = {"params": 70e9}
    for _ in range(2):
        assert client.post("/v1/jobs/serve-rate/reports", json={**body, "interval_seconds": None}).status_code == 200
        clock.advance(10)
    job = client.get("/v1/jobs/serve-rate").json()
    serving = {e["category"]: e["gpu_seconds"] for e in job["serving_waterfall"]}
    assert serving["busy"] == pytest.approx(80.0)  # the second tile: serving, phases unknown
    assert serving["down"] == pytest.approx(job["total_gpu_seconds"] - 80.0)
    assert job["slo_goodput_ratio"] is None and job["serving"] is None


def test_concurrent_serving_reports_all_count(client: TestClient) -> None:
    """Reports of one serving job racing each other: every one lands in the history and the window, none is lost to
    a lost update of the ledger (both databases)."""

    def post(_: int) -> int:
        return client.post("/v1/jobs/serve-race/reports", json=report_with()).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(post, range(16))) == [200] * 16
    job = client.get("/v1/jobs/serve-race", params={"history": 50}).json()
    assert job["reports_received"] == 16
    assert len([row for row in job["history"] if row["serving"]]) == 16
    assert job["serving"]["slo_goodput"]["requests"] == 16 * 100  # all in the window (one clock instant)
    serving = sum(e["gpu_seconds"] for e in job["serving_waterfall"])
    assert serving == pytest.approx(job["total_gpu_seconds"])
