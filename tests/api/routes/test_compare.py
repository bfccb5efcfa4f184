"""GET /v1/compare (issue 11 #6): two jobs before and after, from the live ledger or an ended job's summary; unknown
and malformed ids refused. SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.clock import Clock
from tests.utils.factories import report

T0 = 1_800_000_000.0


def _train(
    client: TestClient, clock: Clock, job_id: str, rate: float, *, data_wait: float, n: int = 4, **f: Any
) -> None:
    """``n`` reports 60 s apart, each covering its 60 s, with steps of 1 s of which ``data_wait`` waits for input."""
    for _ in range(n):
        clock.advance(60)
        body = report(interval_seconds=60, tokens=int(rate * 60), step_seconds=1.0, data_wait_seconds=data_wait, **f)
        del body["tokens_per_second"]
        assert client.post(f"/v1/jobs/{job_id}/reports", json=body).status_code == 200


def _rows(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["metric"]: row for row in result["rows"]}


def _waterfall(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["category"]: row for row in result["waterfall"]}


def test_before_and_after_while_running_and_once_ended(client: TestClient) -> None:
    clock = Clock(client, start=T0)
    _train(client, clock, "before", 20_000, data_wait=0.25)
    # Ended right after its last report: no silence to bill, its summary holds what its ledger held.
    running = client.get("/v1/compare", params={"a": "before", "b": "before"}).json()
    assert client.post("/v1/jobs/before/end", json={"exit_code": 0}).status_code == 200
    _train(client, clock, "after", 25_000, data_wait=0.05)
    result = client.get("/v1/compare", params={"a": "before", "b": "after"}).json()
    assert result["same_signature"] is True and result["a"]["signature"] == result["b"]["signature"]
    assert (result["a"]["source"], result["b"]["source"]) == ("summary", "ledger")
    assert result["a"]["outcome"] == "success" and result["b"]["status"] == "running"
    assert _rows(result)["mfu"]["a"] == pytest.approx(_rows(running)["mfu"]["a"])
    assert _waterfall(result)["data_wait"]["a_share"] == pytest.approx(_waterfall(running)["data_wait"]["a_share"])
    rows = _rows(result)
    mfu = rows["mfu"]
    assert mfu["ratio"] == pytest.approx(25_000 / 20_000) and mfu["delta"] == pytest.approx(mfu["b"] - mfu["a"])
    assert result["a"]["baseline_mfu"] is None or result["a"]["baseline_mfu"] > 0
    per_gpu = rows["tokens_per_second_per_gpu"]
    assert (per_gpu["a"], per_gpu["b"]) == (pytest.approx(20_000 / 8), pytest.approx(25_000 / 8))
    assert rows["goodput_ratio"]["a"] == pytest.approx(1.0)  # all step time: waits are part of it
    assert rows["gpu_hours"]["a"] == pytest.approx(4 * 60 * 8 / 3600)
    waterfall = _waterfall(result)
    assert waterfall["data_wait"]["a_share"] == pytest.approx(0.25)
    assert waterfall["data_wait"]["b_share"] == pytest.approx(0.05)
    assert waterfall["data_wait"]["share_delta"] == pytest.approx(-0.20)
    assert waterfall["compute"]["share_delta"] == pytest.approx(0.20)
    assert waterfall["data_wait"]["a_gpu_seconds"] == pytest.approx(0.25 * 4 * 60 * 8)
    assert sum(w["a_share"] for w in result["waterfall"]) == pytest.approx(1.0)
    # Ended late, "after" was silent meanwhile: its summary bills that silence as stalled, and the comparison says so.
    clock.advance(120)
    assert client.post("/v1/jobs/after/end", json={"exit_code": 1}).status_code == 200
    ended = client.get("/v1/compare", params={"a": "before", "b": "after"}).json()
    assert ended["b"]["source"] == "summary" and ended["b"]["outcome"] == "failure"
    assert _waterfall(ended)["stalled"]["b_gpu_seconds"] == pytest.approx(120 * 8)
    assert _rows(ended)["goodput_ratio"]["b"] == pytest.approx(240 / 360)
    assert _rows(ended)["mfu"]["b"] == pytest.approx(mfu["b"])  # the reports' MFU: silence is not a report


def test_data_parallel_scales_compare_like_with_like(client: TestClient) -> None:
    clock = Clock(client, start=T0)
    layout = {"tensor": 4, "pipeline": 2, "micro_batch_size": 1}
    _train(client, clock, "dp2", 10_000, data_wait=0.0, num_gpus=16, parallelism=layout)
    _train(client, clock, "dp8", 38_000, data_wait=0.0, num_gpus=64, parallelism=layout)
    _train(client, clock, "plain", 10_000, data_wait=0.0, num_gpus=16)
    result = client.get("/v1/compare", params={"a": "dp2", "b": "dp8"}).json()
    assert result["same_signature"] is True
    assert _rows(result)["tokens_per_second_per_gpu"]["ratio"] == pytest.approx(38_000 / 64 / (10_000 / 16))
    assert _rows(result)["num_gpus"]["delta"] == 48
    other = client.get("/v1/compare", params={"a": "dp2", "b": "plain"}).json()
    assert other["same_signature"] is False


def test_unknown_and_bad_ids(client: TestClient) -> None:
    clock = Clock(client, start=T0)
    _train(client, clock, "known", 20_000, data_wait=0.0, n=1)
    missing = client.get("/v1/compare", params={"a": "known", "b": "ghost"})
    assert missing.status_code == 404 and "ghost" in missing.json()["detail"]
    assert client.get("/v1/compare", params={"a": "ghost", "b": "known"}).status_code == 404
    for params in (
        {"a": "known"},
        {"a": "known", "b": "no spaces"},
        {"a": "x" * 129, "b": "known"},
        {"a": "", "b": "k"},
    ):
        response = client.get("/v1/compare", params=params)
        assert response.status_code == 422, params
        assert response.json()["detail"][0]["field"] in ("a", "b")
    # A job that never reported: nothing to compare yet, but it is a job: the figures are null, not an error.
    assert client.put("/v1/jobs/pending-one", json={"gpus_requested": 8}).status_code == 200
    pending = client.get("/v1/compare", params={"a": "known", "b": "pending-one"}).json()
    assert _rows(pending)["mfu"]["b"] is None and _rows(pending)["mfu"]["ratio"] is None
    assert pending["same_signature"] is False
