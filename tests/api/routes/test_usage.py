"""Windowed usage (GET /v1/usage): the durable counters by the hour answer "where did the GPU-hours go" for any
window, per pool, team and the cluster, and past hours fold into one shard without changing a sum."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from mfumon.api.crud.counters import HOUR
from mfumon.api.db.tables import CounterHourRow
from mfumon.api.services.accounting import maintain_hours
from tests.utils.clock import Clock
from tests.utils.factories import report

T0 = 1_800_000_000 - 1_800_000_000 % HOUR  # the start of an hour


def _job_report(client: TestClient, job_id: str, *, team: str, seconds: float, gpus: int = 2) -> None:
    body = {**report(num_gpus=gpus, team=team, pool="a"), "interval_seconds": seconds, "tokens": 1_000_000}
    del body["tokens_per_second"]
    assert client.post(f"/v1/jobs/{job_id}/reports", json=body).status_code == 200


def _categories(group: dict) -> dict[str, float]:
    return {row["category"]: row["gpu_seconds"] for row in group["waterfall"]}


def test_a_window_counts_the_hours_it_covers(client: TestClient) -> None:
    clock = Clock(client, start=T0 + 60)
    _job_report(client, "early", team="x", seconds=100)  # 200 GPU-s in the first hour
    clock.advance(2 * HOUR)
    _job_report(client, "late", team="y", seconds=50)  # 100 GPU-s two hours later
    client.post("/v1/jobs/late/end", json={"exit_code": 3})  # it ends at once: nothing more billed
    both = client.get("/v1/usage", params={"since": T0, "until": T0 + 3 * HOUR}).json()
    assert both["since"] == T0 and both["until"] == T0 + 3 * HOUR and both["bucket_seconds"] == HOUR
    assert both["cluster"]["jobs_gpu_seconds"] == pytest.approx(300)
    assert _categories(both["cluster"])["compute"] == pytest.approx(300)
    assert {t["name"]: t["total_gpu_seconds"] for t in both["teams"]} == pytest.approx({"x": 200, "y": 100})
    assert [p["name"] for p in both["pools"]] == ["a"]
    assert both["ends"] == [{"kind": "training", "outcome": "failure", "count": 1}]
    assert 0 < both["cluster"]["mfu"] <= 1 and both["cluster"]["goodput_ratio"] == pytest.approx(1)

    last = client.get("/v1/usage", params={"since": "1h"}).json()  # now is 2h01m in: from 1h01m, whole hours
    assert last["since"] == T0 + HOUR
    assert [t["name"] for t in last["teams"]] == ["y"]
    assert last["cluster"]["jobs_gpu_seconds"] == pytest.approx(100)
    first = client.get("/v1/usage", params={"since": T0, "until": T0 + 1}).json()  # rounded up to the hour
    assert first["until"] == T0 + HOUR and first["cluster"]["jobs_gpu_seconds"] == pytest.approx(200)
    empty = client.get("/v1/usage", params={"since": T0 - 5 * HOUR, "until": T0}).json()
    assert empty["cluster"]["total_gpu_seconds"] == 0 and empty["teams"] == [] and empty["ends"] == []
    assert empty["cluster"]["mfu"] is None and empty["cluster"]["goodput_ratio"] is None


@pytest.mark.parametrize(
    "params",
    [{"since": "yesterday"}, {"since": "7y"}, {"since": "-5"}, {"since": "1e12"}, {"since": T0, "until": T0 - 1}],
)
def test_bad_windows_are_refused(client: TestClient, params: dict) -> None:
    response = client.get("/v1/usage", params=params)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] in ("since", "until")


def test_past_hours_fold_into_one_shard_without_changing_a_sum(client: TestClient) -> None:
    clock = Clock(client, start=T0 + 10)
    for i in range(12):  # jobs hash to different shards
        _job_report(client, f"job-{i}", team="t", seconds=10 + i)
    before = client.get("/v1/usage", params={"since": T0, "until": T0 + HOUR}).json()
    ctx = client.app.state.ctx  # type: ignore[attr-defined]

    def shards() -> int:
        with ctx.sessions.begin() as session:
            return int(session.scalar(select(func.count(func.distinct(CounterHourRow.shard)))) or 0)

    assert shards() > 1
    maintain_hours(ctx)  # the first run only sets the mark
    clock.advance(2 * HOUR)
    assert maintain_hours(ctx) > 0
    assert shards() == 1
    after = client.get("/v1/usage", params={"since": T0, "until": T0 + HOUR}).json()
    assert after == before
    clock.advance(ctx.settings.USAGE_RETENTION_DAYS * 86400)
    maintain_hours(ctx)  # past the retention: dropped
    assert client.get("/v1/usage", params={"since": T0, "until": T0 + HOUR}).json()["cluster"]["total_gpu_seconds"] == 0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "9999999999999999w"}, "since"),  # a 500 on SQLite (integer overflow), a 422 on `body` on PostgreSQL
        ({"until": "9999999999999999w"}, "until"),
        ({"since": "1e9"}, "since"),  # Unix seconds are digits; an exponent was taken by float() before
        ({"since": " 7d"}, "since"),
        ({"since": "7d", "until": "1_000"}, "until"),
        ({"since": "inf"}, "since"),
        ({"since": "1234567w"}, "since"),  # at most 6 digits
        ({"since": T0, "until": T0 - 1}, "since"),
        ({"since": "2d", "until": "3d"}, "since"),
        ({"since": 99_999_999_999}, "since"),  # after now (until's default)
    ],
)
def test_a_window_bound_out_of_range_is_422_naming_the_query_field(
    client: TestClient, params: dict, field: str
) -> None:
    response = client.get("/v1/usage", params=params)
    assert response.status_code == 422, response.text
    assert [(e["field"], e["loc"]) for e in response.json()["detail"]] == [(field, ["query", field])]


def test_a_duration_reaching_before_1970_starts_there(client: TestClient) -> None:
    response = client.get("/v1/usage", params={"since": "999999w"})
    assert response.status_code == 200, response.text
    assert response.json()["since"] == 0


def test_the_window_bounds_are_documented_as_the_server_takes_them(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/usage"]["get"]
    patterns = {p["name"]: p["schema"] for p in operation["parameters"]}
    assert "since" in operation["responses"]["422"]["description"]
    for name in ("since", "until"):
        schema = patterns[name]
        pattern = schema.get("pattern") or next(s["pattern"] for s in schema["anyOf"] if "pattern" in s)
        assert re.search(pattern, "7d") and re.search(pattern, "1767225600.5")
        assert not re.search(pattern, "9999999999999999w") and not re.search(pattern, "1e9")
