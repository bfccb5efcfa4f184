"""GPUs busy without reports, per job and per node, as durable counters: billed once per interval whatever the
replicas, read back by every replica, and gone from /metrics with the job or node (the rules read them with
increase() over a day)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from mfumon.api.services.accounting import bill_gpu_states
from tests.utils.clock import Clock
from tests.utils.factories import gpu, metric_value, report, scrape

IDLE = {"utilization": 0, "sm_active": 0, "tensor_active": 0}


def _post_node(client: TestClient, clock: Clock, name: str, gpus: list[dict]) -> None:
    assert client.post(f"/v1/nodes/{name}/samples", json={"timestamp": clock.now, "pool": "p", "gpus": gpus}).is_success
    client.app.state.ctx.sample_writer.flush()  # type: ignore[attr-defined]  # the group commit, now


def test_jobs_and_nodes_busy_without_reports_are_counted_once_per_interval(
    make_client: Callable[..., TestClient],
) -> None:
    first, second = make_client(), make_client()  # two replicas on one database
    clock = Clock(first, second)
    # n1: 3 GPUs of a job that never reports, 2 of one that reports, 1 busy with no job id, 2 idle.
    gpus = [gpu(i, job_id="silent") for i in range(3)]
    gpus += [gpu(3, job_id="talks"), gpu(4, job_id="talks"), gpu(5), gpu(6) | IDLE, gpu(7) | IDLE]
    _post_node(first, clock, "n1", gpus)
    assert first.post("/v1/jobs/talks/reports", json=report(num_gpus=2)).is_success
    second.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
    replicas = [first.app.state.ctx, second.app.state.ctx]  # type: ignore[attr-defined]
    for ctx in replicas:
        bill_gpu_states(ctx)  # the mark starts here
    for _ in range(3):
        clock.advance(10)
        assert sorted(bill_gpu_states(ctx) for ctx in replicas) == [0.0, 10.0]
    for client in (first, second):
        client.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
        text = scrape(client)
        assert metric_value(text, "mfumon_job_unreported_seconds_total", job_id="silent") == pytest.approx(30)
        assert metric_value(text, "mfumon_job_unreported_gpu_seconds_total", job_id="silent") == pytest.approx(90)
        assert metric_value(text, "mfumon_job_unreported_seconds_total", job_id="talks") is None
        assert metric_value(text, "mfumon_node_unattributed_busy_seconds_total", node="n1") == pytest.approx(30)
        assert metric_value(text, "mfumon_node_unattributed_busy_gpu_seconds_total", node="n1") == pytest.approx(30)


def test_a_job_that_starts_reporting_stops_counting_and_keeps_its_total(client: TestClient) -> None:
    clock = Clock(client)
    _post_node(client, clock, "n1", [gpu(0, job_id="late"), gpu(1, job_id="late")])
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    bill_gpu_states(ctx)
    clock.advance(15)
    bill_gpu_states(ctx)
    assert client.post("/v1/jobs/late/reports", json=report(num_gpus=2)).is_success
    _post_node(client, clock, "n1", [gpu(0, job_id="late"), gpu(1, job_id="late")])
    clock.advance(15)
    bill_gpu_states(ctx)
    text = scrape(client)
    assert metric_value(text, "mfumon_job_unreported_seconds_total", job_id="late") == pytest.approx(15)
    assert metric_value(text, "mfumon_job_unreported_gpu_seconds_total", job_id="late") == pytest.approx(30)


def test_series_of_ended_jobs_and_vanished_nodes_disappear(client: TestClient) -> None:
    clock = Clock(client)
    _post_node(client, clock, "n1", [gpu(0, job_id="gone"), gpu(1)])
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    bill_gpu_states(ctx)
    clock.advance(10)
    bill_gpu_states(ctx)
    text = scrape(client)
    assert metric_value(text, "mfumon_job_unreported_seconds_total", job_id="gone") == pytest.approx(10)
    assert metric_value(text, "mfumon_node_unattributed_busy_seconds_total", node="n1") == pytest.approx(10)
    clock.advance(ctx.settings.NODE_TTL_SECONDS + 1)  # the node stops pushing: it and the id only it knew vanish
    text = scrape(client)
    assert 'job_id="gone"' not in text
    assert 'node="n1"' not in text
