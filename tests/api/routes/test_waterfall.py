"""The waste waterfall through the API: per job, summed per pool, team and cluster, exactly; counters durable."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from mfumon.api.accounting import CATEGORIES
from mfumon.api.services.accounting import bill_gpu_states
from tests.utils.clock import Clock
from tests.utils.factories import gpu, metric_samples, metric_value, report, scrape

STEP = {"step_seconds": 2.0, "data_wait_seconds": 0.2, "comm_seconds": 0.4, "bubble_seconds": 0.1}


def _waterfall(job: dict) -> dict[str, float]:
    return {row["category"]: row["gpu_seconds"] for row in job["waterfall"]}


def _counter(text: str, name: str, **labels: str) -> float:
    return metric_value(text, name, **labels) or 0.0


def test_a_job_life_splits_into_categories(client: TestClient) -> None:
    clock = Clock(client)
    client.post("/v1/jobs/life/events", json={"type": "init", "seconds": 60})
    body = {**report(num_gpus=4, team="llm", pool="h100"), "interval_seconds": 20.0, "tokens": 500_000}
    del body["tokens_per_second"]
    client.post("/v1/jobs/life/reports", json={**body, **STEP})  # covers 20 s of steps
    clock.advance(30)
    client.post("/v1/jobs/life/events", json={"type": "checkpoint_save", "seconds": 10, "step": 100})
    client.post("/v1/jobs/life/reports", json={**body, "interval_seconds": 30.0, **STEP})
    job = client.get("/v1/jobs/life").json()
    parts = _waterfall(job)
    # init 60 s; steps 20 + 20 s (the 30 s tile less the 10 s checkpoint), split 10% / 20% / 5% / 65%.
    assert parts["init"] == pytest.approx(4 * 60)
    assert parts["checkpoint"] == pytest.approx(4 * 10)
    assert parts["data_wait"] == pytest.approx(4 * 40 * 0.1)
    assert parts["comm_exposed"] == pytest.approx(4 * 40 * 0.2)
    assert parts["bubble"] == pytest.approx(4 * 40 * 0.05)
    assert parts["compute"] == pytest.approx(4 * 40 * 0.65)
    assert job["total_gpu_seconds"] == pytest.approx(4 * 110)
    assert job["goodput_ratio"] == pytest.approx(40 / 110)
    assert 0 < job["lifetime_mfu"] < job["compute_mfu"]

    text = scrape(client)
    for category, value in parts.items():
        labels = {"job_id": "life", "category": category}
        assert metric_value(text, "mfumon_job_gpu_seconds_total", **labels) == pytest.approx(value)
        assert _counter(text, "mfumon_pool_gpu_seconds_total", pool="h100", category=category) == pytest.approx(value)
        assert _counter(text, "mfumon_team_gpu_seconds_total", team="llm", category=category) == pytest.approx(value)
        assert _counter(text, "mfumon_cluster_gpu_seconds_total", category=category) == pytest.approx(value)
    assert metric_value(text, "mfumon_job_goodput_ratio", job_id="life") == pytest.approx(40 / 110)
    assert metric_value(text, "mfumon_job_lifetime_mfu_ratio", job_id="life") == pytest.approx(job["lifetime_mfu"])
    model = _counter(text, "mfumon_cluster_model_flops_total")
    peak = _counter(text, "mfumon_cluster_peak_flops_total")
    assert model / peak == pytest.approx(job["lifetime_mfu"])


def test_failure_then_restart_charges_the_redone_progress_as_lost(client: TestClient) -> None:
    clock = Clock(client)
    body = {**report(num_gpus=2), "tokens": 100_000, "interval_seconds": 50.0}
    del body["tokens_per_second"]
    client.post("/v1/jobs/crashy/reports", json=body)
    client.post("/v1/jobs/crashy/events", json={"type": "checkpoint_save", "seconds": 0, "step": 50})
    clock.advance(40)
    client.post("/v1/jobs/crashy/reports", json={**body, "interval_seconds": 40.0})  # 80 GPU-s since checkpoint
    clock.advance(5)
    client.post("/v1/jobs/crashy/events", json={"type": "failure", "exit_code": 137})
    client.post("/v1/jobs/crashy/end")
    ended = client.get("/v1/jobs/crashy").json()
    assert ended["summary"]["outcome"] == "failure" and ended["summary"]["failures"] == 1
    clock.advance(600)  # requeued: the time it was gone is not its allocation
    client.post("/v1/jobs/crashy/events", json={"type": "init", "seconds": 30})
    client.post("/v1/jobs/crashy/reports", json={**body, "interval_seconds": 60.0})
    parts = _waterfall(client.get("/v1/jobs/crashy").json())
    assert parts["lost"] == pytest.approx(80.0)  # the 80 GPU-s redone first
    assert parts["init"] == pytest.approx(60.0)
    assert parts["stalled"] == pytest.approx(2 * 5)  # between the last report and the end
    assert parts["compute"] == pytest.approx(2 * 50 + 80 + (120 - 80))


def test_ended_job_keeps_a_summary_and_its_series_vanish(client: TestClient) -> None:
    Clock(client)
    client.post("/v1/jobs/done/reports", json={**report(num_gpus=8, team="t"), **STEP, "tokens_per_second": 30_000})
    ended = client.post("/v1/jobs/done/end", json={"exit_code": 0}).json()
    summary = ended["summary"]
    assert summary["outcome"] == "success" and summary["exit_code"] == 0 and summary["restarts"] == 0
    assert summary["gpu_hours"] == pytest.approx(summary["total_gpu_seconds"] / 3600)
    assert [row["category"] for row in summary["waterfall"]] == list(CATEGORIES)
    assert client.get("/v1/jobs/done").json()["summary"] == summary
    text = scrape(client)
    assert 'job_id="done"' not in text
    assert metric_value(text, "mfumon_job_ends_total", kind="training", outcome="success") == 1


def test_idle_and_unreported_gpus_are_billed_once_per_interval(make_client: Callable[..., TestClient]) -> None:
    first, second = make_client(), make_client()  # two replicas on one database
    clock = Clock(first, second)
    gpus = [gpu(i) | {"utilization": 0, "sm_active": 0, "tensor_active": 0} for i in range(6)]
    gpus += [gpu(6, job_id="nobody-reports"), gpu(7, job_id="nobody-reports")]
    assert first.post("/v1/nodes/n1/samples", json={"timestamp": clock.now, "pool": "spare", "gpus": gpus}).is_success
    first.app.state.ctx.sample_writer.flush()  # type: ignore[attr-defined]  # the group commit, now
    second.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
    replicas = [first.app.state.ctx, second.app.state.ctx]  # type: ignore[attr-defined]
    for ctx in replicas:
        bill_gpu_states(ctx)  # the mark starts here: nothing billed before anyone looked
    for _ in range(2):
        clock.advance(10)
        billed = [bill_gpu_states(ctx) for ctx in replicas]
        assert sorted(billed) == [0.0, 10.0]  # whichever replica moves the mark first bills the interval
    for client in (first, second):
        client.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
        text = scrape(client)
        # 20 s: 6 idle GPUs and 2 unreported ones, billed once though both replicas ran.
        assert _counter(text, "mfumon_pool_gpu_seconds_total", pool="spare", category="idle") == pytest.approx(120)
        assert _counter(text, "mfumon_pool_gpu_seconds_total", pool="spare", category="unreported") == pytest.approx(40)
        assert _counter(text, "mfumon_cluster_gpu_seconds_total", category="idle") == pytest.approx(120)
        # Every category of a known pool is exported, zeros included, so increase() sees the first increment.
        assert metric_value(text, "mfumon_pool_gpu_seconds_total", pool="spare", category="compute") == 0


def test_a_long_silence_is_billed_for_the_node_ttl_at_most(client: TestClient) -> None:
    clock = Clock(client)
    gpus = [gpu(i) | {"utilization": 0, "sm_active": 0, "tensor_active": 0} for i in range(2)]
    client.post("/v1/nodes/n1/samples", json={"timestamp": clock.now, "pool": "p", "gpus": gpus})
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    bill_gpu_states(ctx)
    clock.advance(3600)  # every replica was down for an hour: nobody saw the GPUs
    assert bill_gpu_states(ctx) == ctx.settings.NODE_TTL_SECONDS


def _random_life(client: TestClient, clock: Clock, rng: random.Random) -> dict[str, tuple[str | None, str | None]]:
    """Random reports, events and ends over a few jobs; returns job -> (pool, team)."""
    jobs = {f"j{i}": (rng.choice(["a", "b", None]), rng.choice(["x", "y", None])) for i in range(5)}
    for _ in range(120):
        job_id = rng.choice(list(jobs))
        pool, team = jobs[job_id]
        clock.advance(rng.uniform(0, 40))
        action = rng.random()
        if action < 0.55:
            body = report(num_gpus=rng.choice([1, 2, 8]))
            del body["tokens_per_second"]
            body |= {"tokens": rng.choice([0, 10_000, 200_000]), "interval_seconds": rng.uniform(1, 40)}
            body |= {k: rng.uniform(0, 1.5) for k in STEP if rng.random() < 0.5}
            body |= {k: v for k, v in (("pool", pool), ("team", team)) if v}
            if rng.random() < 0.2:
                body["step"] = rng.randint(0, 50)
            assert client.post(f"/v1/jobs/{job_id}/reports", json=body).status_code == 200
        elif action < 0.9:
            event = {"type": rng.choice(["init", "checkpoint_save", "checkpoint_load", "eval", "restart", "failure"])}
            if rng.random() < 0.8:
                event["seconds"] = rng.uniform(0, 60)
            assert client.post(f"/v1/jobs/{job_id}/events", json=event).status_code == 200
        else:
            code = rng.choice([None, 0, 1])
            client.post(f"/v1/jobs/{job_id}/end", json={} if code is None else {"exit_code": code})
    for job_id in jobs:
        client.post(f"/v1/jobs/{job_id}/end", json={"exit_code": 0})
    return jobs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_jobs_pools_teams_and_cluster_add_up_exactly(client: TestClient, seed: int) -> None:
    clock = Clock(client)
    jobs = _random_life(client, clock, random.Random(seed))
    text = scrape(client)
    expected: dict[tuple[str, str, str], float] = defaultdict(float)
    for job_id, (pool, team) in jobs.items():
        job = client.get(f"/v1/jobs/{job_id}").json()
        parts = _waterfall(job["summary"])
        assert all(v >= 0 for v in parts.values())
        assert sum(parts.values()) == pytest.approx(job["summary"]["total_gpu_seconds"], rel=1e-9)
        for category, value in parts.items():
            expected[("cluster", "", category)] += value
            if pool:
                expected[("pool", pool, category)] += value
            if team:
                expected[("team", team, category)] += value
    for (scope, name, category), value in expected.items():
        labels = {"category": category} | ({scope: name} if name else {})
        exported = _counter(text, f"mfumon_{scope}_gpu_seconds_total", **labels)
        assert exported == pytest.approx(value, rel=1e-9, abs=1e-6), (scope, name, category)
    samples = metric_samples(text)
    exported_pools = {dict(lbls).get("pool") for (n, lbls) in samples if n == "mfumon_pool_gpu_seconds_total"}
    assert exported_pools <= {"a", "b"}


def test_counters_survive_a_restart_and_only_grow(make_client: Callable[..., TestClient]) -> None:
    first = make_client()
    clock = Clock(first)
    first.post("/v1/jobs/r/reports", json={**report(pool="p"), **STEP})
    clock.advance(15)
    first.post("/v1/jobs/r/reports", json={**report(pool="p"), **STEP})
    before = scrape(first)
    first.__exit__(None, None, None)
    second = make_client()
    after = scrape(second)
    for category in CATEGORIES:
        labels = {"pool": "p", "category": category}
        assert _counter(after, "mfumon_pool_gpu_seconds_total", **labels) == _counter(
            before, "mfumon_pool_gpu_seconds_total", **labels
        )


def test_tensor_activity_spread_names_uneven_jobs(client: TestClient) -> None:
    gpus = [gpu(i, job_id="uneven", tensor_active=0.4) for i in range(7)] + [gpu(7, job_id="uneven", tensor_active=0.8)]
    client.post("/v1/nodes/n1/samples", json={"timestamp": 1.7e9, "pool": "p", "gpus": gpus})
    even = [gpu(i, job_id="even", tensor_active=0.5) | {"uuid": f"GPU-even-{i}"} for i in range(4)]
    client.post("/v1/nodes/n2/samples", json={"timestamp": 1.7e9, "pool": "p", "gpus": even})
    client.post("/v1/jobs/uneven/reports", json=report())
    client.post("/v1/jobs/even/reports", json=report(num_gpus=4))
    text = scrape(client)
    assert metric_value(text, "mfumon_job_gpu_tensor_active_spread_ratio", job_id="uneven") == pytest.approx(0.5)
    assert metric_value(text, "mfumon_job_gpu_tensor_active_spread_ratio", job_id="even") == 0
