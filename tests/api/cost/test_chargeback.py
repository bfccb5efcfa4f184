"""Energy and cost through the API (issue 60): per job from the GPUs' energy counters, priced as billed, and a
chargeback whose rows add up to the fleet."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.core.security import parse_tokens
from mfumon.api.errors import TokenConfigError
from mfumon.api.services.accounting import bill_gpu_states
from tests.api.routes.test_inference import serving_report
from tests.utils.clock import Clock
from tests.utils.factories import gpu, metric_value, report, scrape

WATTS = 500.0
PRICES = {"currency": "EUR", "gpu_hour": {"pools": {"h100": 3.6}, "default": 1.8}, "kwh": 0.1, "pue": 1.5}
PER_JOULE = 0.1 * 1.5 / 3.6e6
IDLE = {"utilization": 0.0, "sm_active": 0.0, "tensor_active": 0.0, "compute_processes": 0}


class Fleet:
    """Two nodes: h100 (pool priced 3.6/GPU-hour) with job a (team llm) on GPUs 0-1, GPU 2 idle and GPU 3 busy with
    no job; spare (the default price, 1.8) with job b (no team) on GPUs 0-1. Every GPU's energy counter grows at
    500 W (70 W idle) unless a test says otherwise."""

    def __init__(self, client: TestClient) -> None:
        self.client, self.clock = client, Clock(client)
        self.ctx = client.app.state.ctx  # type: ignore[attr-defined]
        self.energy: dict[tuple[str, int], float] = {}
        self.reset: set[tuple[str, int]] = set()

    def _gpu(self, node: str, index: int, watts: float, elapsed: float, **fields: Any) -> dict[str, Any]:
        key = (node, index)
        joules = 1e6 if key not in self.energy else self.energy[key] + watts * elapsed
        if key in self.reset:  # the driver reloaded: the counter starts again from 0
            joules, _ = watts * 1.0, self.reset.discard(key)
        self.energy[key] = joules
        return gpu(index, uuid=f"GPU-{node}-{index}", energy_joules_total=joules, power_watts=watts, **fields)

    def push(self, elapsed: float = 0.0) -> None:
        h100 = [
            self._gpu("h100", 0, WATTS, elapsed, job_id="a"),
            self._gpu("h100", 1, WATTS, elapsed, job_id="a"),
            self._gpu("h100", 2, 70.0, elapsed, **IDLE),
            self._gpu("h100", 3, WATTS, elapsed, compute_processes=1),
        ]
        spare = [self._gpu("spare", i, WATTS, elapsed, job_id="b") for i in (0, 1)]
        for node, pool, gpus in (("n1", "h100", h100), ("n2", "spare", spare)):
            body = {"timestamp": self.clock.now, "pool": pool, "gpus": gpus}
            assert self.client.post(f"/v1/nodes/{node}/samples", json=body).is_success

    def report(self, interval: float) -> None:
        for job_id, team in (("a", "llm"), ("b", None)):
            body = report(num_gpus=2, tokens=10_000.0 * interval, interval_seconds=interval)
            del body["tokens_per_second"]
            if team:
                body["team"] = team
            assert self.client.post(f"/v1/jobs/{job_id}/reports", json=body).is_success

    def tick(self, seconds: float = 10.0) -> None:
        """``seconds`` pass: the exporters push, the jobs report, the periodic billing runs."""
        self.clock.advance(seconds)
        self.push(seconds)
        self.report(seconds)
        assert bill_gpu_states(self.ctx) == pytest.approx(seconds)

    def start(self) -> None:
        self.push()
        self.report(10.0)
        bill_gpu_states(self.ctx)  # the billing mark starts here


def _row(body: dict[str, Any], kind: str, name: str | None = None) -> dict[str, Any]:
    (row,) = [r for r in body["rows"] if r["kind"] == kind and r["name"] == name]
    return row


def _sums_to_fleet(body: dict[str, Any]) -> None:
    rows, fleet = body["rows"], body["fleet"]
    for key in ("gpu_seconds", "energy_joules", "unpriced_gpu_seconds"):
        assert math.fsum(r[key] for r in rows) == pytest.approx(fleet[key], rel=1e-12), key
    assert math.fsum(r["cost"] or 0.0 for r in rows) == pytest.approx(fleet["cost"] or 0.0, rel=1e-12)


def test_rows_add_up_to_the_fleet_and_each_is_priced_by_pool_then_default(client: TestClient) -> None:
    assert client.put("/v1/prices", json=PRICES).is_success
    fleet = Fleet(client)
    fleet.start()
    for _ in range(3):
        fleet.tick()
    body = client.get("/v1/chargeback", params={"since": "1h"}).json()
    assert body["currency"] == "EUR" and body["priced"] is True
    _sums_to_fleet(body)
    llm, no_team = _row(body, "team", "llm"), _row(body, "no_team")
    idle, unreported = _row(body, "idle"), _row(body, "unreported")
    # 30 s billed after the mark: each state's GPUs x 30 s; the jobs' waterfall tiles cover their reports.
    assert idle["gpu_seconds"] == pytest.approx(30.0) and unreported["gpu_seconds"] == pytest.approx(30.0)
    assert idle["energy_joules"] == pytest.approx(70.0 * 30)
    assert idle["cost"] == pytest.approx(30 * 3.6 / 3600 + 70.0 * 30 * PER_JOULE)
    assert unreported["cost"] == pytest.approx(30 * 3.6 / 3600 + WATTS * 30 * PER_JOULE)
    assert llm["energy_joules"] == pytest.approx(2 * WATTS * 30)  # from the counters' differences
    assert llm["cost"] == pytest.approx(llm["gpu_seconds"] * 3.6 / 3600 + 2 * WATTS * 30 * PER_JOULE)
    assert no_team["cost"] == pytest.approx(no_team["gpu_seconds"] * 1.8 / 3600 + 2 * WATTS * 30 * PER_JOULE)
    assert llm["tokens"] > 0 and llm["cost_per_million_tokens"] == pytest.approx(llm["cost"] / llm["tokens"] * 1e6)
    # The job rows split the team rows.
    jobs = {j["job_id"]: j for j in body["jobs"]}
    assert jobs["a"]["team"] == "llm" and jobs["a"]["gpu_seconds"] == pytest.approx(llm["gpu_seconds"])
    assert jobs["a"]["cost"] == pytest.approx(llm["cost"])
    assert jobs["b"]["energy_joules"] == pytest.approx(no_team["energy_joules"])
    assert jobs["a"]["joules_per_token"] == pytest.approx(jobs["a"]["energy_joules"] / jobs["a"]["tokens"])
    # The job's JSON and /metrics say the same.
    job = client.get("/v1/jobs/a").json()
    assert job["energy_joules"] == pytest.approx(jobs["a"]["energy_joules"])
    assert job["cost"] == pytest.approx(jobs["a"]["cost"]) and job["currency"] == "EUR"
    assert job["energy_estimated_joules"] == 0.0
    text = scrape(client)
    labels = {"job_id": "a", "kind": "training"}
    assert metric_value(text, "mfumon_job_energy_joules_total", **labels) == pytest.approx(job["energy_joules"])
    assert metric_value(text, "mfumon_job_cost_total", **labels) == pytest.approx(job["cost"])
    assert metric_value(text, "mfumon_job_joules_per_token", **labels) == pytest.approx(job["joules_per_token"])
    assert metric_value(text, "mfumon_team_cost_total", team="llm", category="energy") == pytest.approx(
        2 * WATTS * 30 * PER_JOULE
    )
    assert metric_value(text, "mfumon_prices_info", currency="EUR") == 1


def test_a_pool_with_no_price_says_so_and_is_never_zero(client: TestClient) -> None:
    prices = {"gpu_hour": {"pools": {"h100": 3.6}}}  # no default, no kWh: pool spare is unpriced
    assert client.put("/v1/prices", json=prices).is_success
    fleet = Fleet(client)
    fleet.start()
    fleet.tick()
    fleet.tick()
    body = client.get("/v1/chargeback", params={"since": "1h"}).json()
    _sums_to_fleet(body)
    no_team = _row(body, "no_team")
    assert no_team["cost"] is None and no_team["unpriced_gpu_seconds"] == pytest.approx(no_team["gpu_seconds"])
    assert no_team["cost_per_million_tokens"] is None
    assert _row(body, "team", "llm")["cost"] > 0
    job = client.get("/v1/jobs/b").json()
    assert job["cost"] is None and job["unpriced_gpu_seconds"] > 0 and job["currency"] is None
    assert body["fleet"]["cost"] > 0 and body["fleet"]["unpriced_gpu_seconds"] == pytest.approx(no_team["gpu_seconds"])
    text = scrape(client)
    assert metric_value(text, "mfumon_job_cost_total", job_id="b", kind="training") is None
    assert metric_value(text, "mfumon_job_unpriced_gpu_seconds_total", job_id="b", kind="training") > 0


def test_nothing_priced_shows_no_cost_anywhere(client: TestClient) -> None:
    fleet = Fleet(client)
    fleet.start()
    fleet.tick()
    body = client.get("/v1/chargeback", params={"since": "1h"}).json()
    assert body["priced"] is False
    assert body["fleet"]["cost"] is None and all(r["cost"] is None for r in body["rows"] if r["gpu_seconds"] > 0)
    assert body["fleet"]["energy_joules"] > 0  # energy is known without prices
    assert "mfumon_prices_info{" not in scrape(client)


def test_a_job_spanning_a_price_change_pays_each_part_at_its_price(client: TestClient) -> None:
    assert client.put("/v1/prices", json={"gpu_hour": {"default": 3.6}}).is_success
    fleet = Fleet(client)
    fleet.start()
    fleet.tick()
    before = client.get("/v1/jobs/a").json()
    assert client.put("/v1/prices", json={"gpu_hour": {"default": 7.2}}).is_success
    fleet.tick()
    after = client.get("/v1/jobs/a").json()
    tile = after["total_gpu_seconds"] - before["total_gpu_seconds"]
    assert tile > 0
    assert before["cost"] == pytest.approx(before["total_gpu_seconds"] * 3.6 / 3600)
    assert after["cost"] == pytest.approx(before["cost"] + tile * 7.2 / 3600)
    history = client.get("/v1/prices").json()
    assert [h["gpu_hour"]["default"] for h in history["history"]] == [7.2, 3.6]
    assert history["current"]["set_by"] and history["current"]["set_at"] is not None


def test_a_counter_reset_is_estimated_from_power_never_negative(client: TestClient) -> None:
    fleet = Fleet(client)
    fleet.start()
    fleet.tick()
    fleet.reset.add(("spare", 0))  # the driver reloads on n2's GPU 0
    fleet.tick()
    fleet.tick()
    job = client.get("/v1/jobs/b").json()
    # Every interval at 500 W on 2 GPUs; the reset's interval is the power sample's, marked estimated.
    assert job["energy_joules"] == pytest.approx(2 * WATTS * 30)
    assert job["energy_estimated_joules"] == pytest.approx(WATTS * 10)


def test_a_shared_gpu_splits_its_energy_by_share(client: TestClient) -> None:
    clock = Clock(client)
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    shares = [
        {"job_id": "c", "share": 0.75, "method": "process_utilization"},
        {"job_id": "d", "share": 0.25, "method": "process_utilization"},
    ]

    def push_and_report(joules: float) -> None:
        sample = gpu(0, job_id="c", compute_processes=2, shares=shares, energy_joules_total=joules)
        client.post("/v1/nodes/n1/samples", json={"timestamp": clock.now, "gpus": [sample]})
        for job_id in ("c", "d"):
            client.post(f"/v1/jobs/{job_id}/reports", json=report(num_gpus=1))

    push_and_report(1e6)
    bill_gpu_states(ctx)
    clock.advance(10)
    push_and_report(1e6 + 4000.0)  # 400 W
    bill_gpu_states(ctx)
    energy = {j: client.get(f"/v1/jobs/{j}").json()["energy_joules"] for j in ("c", "d")}
    assert energy == {"c": pytest.approx(3000.0), "d": pytest.approx(1000.0)}


def test_serving_and_training_in_one_chargeback(client: TestClient) -> None:
    assert client.put("/v1/prices", json={"gpu_hour": {"default": 2.0}, "kwh": 0.2}).is_success
    fleet = Fleet(client)
    fleet.start()
    serving = {"requests_finished": 50}
    client.post("/v1/jobs/chat/reports", json=serving_report(num_gpus=2, team="serve", **serving))
    bill_gpu_states(fleet.ctx)
    for _ in range(2):
        fleet.clock.advance(10)
        fleet.push(10)
        gpus = [gpu(i, uuid=f"GPU-chat-{i}", job_id="chat", energy_joules_total=1e6 + fleet.clock.now) for i in (0, 1)]
        client.post("/v1/nodes/n3/samples", json={"timestamp": fleet.clock.now, "gpus": gpus})
        fleet.report(10.0)
        client.post("/v1/jobs/chat/reports", json=serving_report(num_gpus=2, team="serve", **serving))
        bill_gpu_states(fleet.ctx)
    body = client.get("/v1/chargeback", params={"since": "1h"}).json()
    _sums_to_fleet(body)
    jobs = {j["job_id"]: j for j in body["jobs"]}
    chat = jobs["chat"]
    assert chat["kind"] == "inference" and chat["team"] == "serve"
    assert chat["tokens"] > 0 and chat["requests"] > 0  # output tokens and requests
    assert chat["joules_per_request"] == pytest.approx(chat["energy_joules"] / chat["requests"])
    assert jobs["a"]["kind"] == "training" and jobs["a"]["tokens"] > 0
    assert _row(body, "team", "serve")["cost"] == pytest.approx(chat["cost"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpu_hour": {"default": -1}}, "default"),
        ({"gpu_hour": {"devices": {"H100 SXM": 2.0}}}, "devices"),
        ({"pue": 0.5}, "pue"),
        ({"kwh": "0.1"}, "kwh"),
        ({"currency": "€ euro"}, "currency"),
        ({"gpu_hour": {"pools": {"a": 1}}, "extra": 1}, "extra"),
    ],
)
def test_a_bad_price_list_is_422_and_changes_nothing(client: TestClient, body: dict[str, Any], field: str) -> None:
    assert client.put("/v1/prices", json={"gpu_hour": {"default": 1.0}}).is_success
    response = client.put("/v1/prices", json=body)
    assert response.status_code == 422 and field in response.text
    assert client.get("/v1/prices").json()["current"]["gpu_hour"]["default"] == 1.0
    assert len(client.get("/v1/prices").json()["history"]) == 1


def test_the_window_must_be_ordered(client: TestClient) -> None:
    assert client.get("/v1/chargeback", params={"since": "1h", "until": "2h"}).status_code == 422
    assert client.get("/v1/chargeback", params={"since": "yesterday"}).status_code == 422


def test_two_replicas_bill_energy_and_cost_once_at_the_price_either_set(
    make_client: Callable[..., TestClient],
) -> None:
    first, second = make_client(), make_client()  # two replicas on one database
    clock = Clock(first, second)
    idle = [gpu(i, energy_joules_total=1e6, **IDLE) for i in range(4)]
    replicas = [first.app.state.ctx, second.app.state.ctx]  # type: ignore[attr-defined]

    def push(joules: float) -> None:
        gpus = [{**g, "energy_joules_total": joules} for g in idle]
        assert first.post("/v1/nodes/n1/samples", json={"timestamp": clock.now, "pool": "p", "gpus": gpus}).is_success
        first.app.state.ctx.sample_writer.flush()  # type: ignore[attr-defined]
        second.app.state.ctx.refresher.load()  # type: ignore[attr-defined]

    push(1e6)
    assert second.put("/v1/prices", json={"gpu_hour": {"pools": {"p": 3.6}}, "kwh": 0.36}).is_success
    for ctx in replicas:
        bill_gpu_states(ctx)
    for step in (1, 2):
        clock.advance(10)
        push(1e6 + 1000.0 * step)  # 100 W a GPU
        push(1e6 + 1000.0 * step)  # the same sample again changes nothing
        assert sorted(bill_gpu_states(ctx) for ctx in replicas) == [0.0, 10.0]
    for client in (first, second):
        body = client.get("/v1/chargeback", params={"since": "1h"}).json()
        idle_row = _row(body, "idle")
        assert idle_row["gpu_seconds"] == pytest.approx(4 * 20)
        assert idle_row["energy_joules"] == pytest.approx(4 * 100 * 20)
        assert idle_row["cost"] == pytest.approx(4 * 20 * 3.6 / 3600 + 4 * 100 * 20 * 0.36 / 3.6e6)
        _sums_to_fleet(body)


def test_only_a_token_with_the_prices_scope_sets_prices_and_the_list_says_who(
    make_client: Callable[..., TestClient],
) -> None:
    tokens = "finance-secret name=finance scopes=prices,read,tokens-secret name=nlp scopes=jobs teams=nlp"
    client = make_client(INGEST_TOKENS=tokens.replace(",tokens-secret", ",nlp-secret"))
    body = {"gpu_hour": {"default": 2.0}}
    assert client.put("/v1/prices", json=body).status_code == 401
    refused = client.put("/v1/prices", json=body, headers={"Authorization": "Bearer nlp-secret"})
    assert refused.status_code == 403 and "prices" in refused.text
    assert client.get("/v1/prices").json()["current"]["set_at"] is None  # nothing changed
    done = client.put("/v1/prices", json=body, headers={"Authorization": "Bearer finance-secret"})
    assert done.status_code == 200 and done.json()["set_by"] == "finance"


def test_a_team_limited_token_cannot_have_the_prices_scope() -> None:
    with pytest.raises(TokenConfigError, match="prices"):
        parse_tokens(["t0ken name=x scopes=jobs,prices teams=nlp"], [])


def test_unpriced_gpu_hours_with_priced_energy_cost_the_energy_and_say_what_is_left_out(client: TestClient) -> None:
    assert client.put("/v1/prices", json={"gpu_hour": {"pools": {"h100": 3.6}}, "kwh": 0.1, "pue": 1.5}).is_success
    fleet = Fleet(client)
    fleet.start()
    fleet.tick()
    body = client.get("/v1/chargeback", params={"since": "1h"}).json()
    _sums_to_fleet(body)
    (b,) = [j for j in body["jobs"] if j["job_id"] == "b"]
    no_team = _row(body, "no_team")
    assert b["cost"] == pytest.approx(2 * WATTS * 10 * PER_JOULE) == pytest.approx(no_team["cost"])
    assert b["gpu_seconds"] > 0 and b["unpriced_gpu_seconds"] == pytest.approx(b["gpu_seconds"])
    assert client.get("/v1/jobs/b").json()["cost"] == pytest.approx(b["cost"])
