"""NCCL Inspector's figures through the node push (issue 61): per job, group and collective on ``/metrics``, summed
over nodes; every bad entry a 422 that changes nothing; what a replica reads back from the database is the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.routes.test_profiles import _summary
from tests.utils.clock import Clock
from tests.utils.factories import gpu, metric_value, report, scrape


def row(job_id: str = "llm", group: str = "dp", collective: str = "AllReduce", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_id": job_id,
        "group": group,
        "collective": collective,
        "ranks": 4,
        "n_ranks": 8,
        "operations_total": 100,
        "seconds_total": 20.0,
        "traffic_bytes_total": 4e11,
        "bus_bytes_total": 7e11,
        "lost_total": 2,
        "window_seconds": 2.0,
        "window_bus_bytes": 8e10,
        "interval_seconds": 10.0,
    }
    body.update(fields)
    return body


def push(client: TestClient, node: str, rows: list[dict[str, Any]], t: float = 1.8e9) -> Any:
    gpus = [gpu(i, uuid=f"GPU-{node}-{i}", job_id="llm") for i in range(4)]
    return client.post(f"/v1/nodes/{node}/samples", json={"timestamp": t, "gpus": gpus, "collectives": rows})


def test_a_jobs_groups_are_summed_over_its_nodes(client: TestClient) -> None:
    client.app.state.ctx.clock = lambda: 1.8e9  # type: ignore[attr-defined]
    assert client.post("/v1/jobs/llm/reports", json=report(num_gpus=8)).is_success
    assert push(client, "n1", [row(), row(group="tp", collective="AllGather", window_seconds=0.0)]).is_success
    assert push(client, "n2", [row(seconds_total=30.0, operations_total=120, window_bus_bytes=1e11)]).is_success
    text = scrape(client)
    dp = {"job_id": "llm", "group": "dp", "collective": "AllReduce"}
    assert metric_value(text, "mfumon_job_collective_seconds_total", **dp) == 50.0
    assert metric_value(text, "mfumon_job_collective_operations_total", **dp) == 220
    assert metric_value(text, "mfumon_job_collective_bus_bytes_total", **dp) == 1.4e12
    assert metric_value(text, "mfumon_job_collective_records_lost_total", job_id="llm", group="dp") == 4
    # (8e10 + 1e11) bytes over 4 GPU-timed seconds in the nodes' last interval.
    bandwidth = metric_value(text, "mfumon_job_collective_bus_bandwidth_bytes_per_second", job_id="llm", group="dp")
    assert bandwidth == pytest.approx(4.5e10)
    # A group with no GPU-timed seconds in the last interval has no bandwidth now, not 0.
    assert metric_value(text, "mfumon_job_collective_bus_bandwidth_bytes_per_second", job_id="llm", group="tp") is None
    # Time in collective kernels: 4 GPU-timed seconds over 2 nodes x 4 ranks x 10 s.
    assert metric_value(text, "mfumon_job_collective_time_ratio", job_id="llm", group="dp") == pytest.approx(0.05)
    # The job ends and its ranks leave the nodes' GPUs: its series go (the agents keep no record of a finished job).
    assert client.post("/v1/jobs/llm/end", json={"exit_code": 0}).is_success
    for node in ("n1", "n2"):
        idle = [gpu(i, uuid=f"GPU-{node}-{i}", compute_processes=0, utilization=0.0) for i in range(4)]
        assert client.post(f"/v1/nodes/{node}/samples", json={"timestamp": 1.8e9 + 1, "gpus": idle}).is_success
    assert 'job_collective_seconds_total{job_id="llm"' not in scrape(client)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (row(collective="AllToAllV"), "collective"),
        (row(group="dp group\n"), "group"),
        (row(seconds_total=-1.0), "seconds_total"),
        (row(ranks=0), "ranks"),
        (row(job_id="bad id"), "job_id"),
        ({**row(), "extra": 1}, "extra"),
    ],
)
def test_a_bad_collective_entry_is_422_and_changes_nothing(client: TestClient, bad: dict[str, Any], field: str) -> None:
    response = push(client, "n1", [bad])
    assert response.status_code == 422 and field in response.text
    assert client.get("/v1/nodes/n1").status_code == 404


def test_the_same_group_and_collective_twice_in_one_push_is_422(client: TestClient) -> None:
    response = push(client, "n1", [row(), row()])
    assert response.status_code == 422 and "duplicate" in response.text


def test_a_replica_reads_the_same_from_the_database(make_client: Callable[..., TestClient]) -> None:
    first, second = make_client(), make_client()
    for client in (first, second):
        client.app.state.ctx.clock = lambda: 1.8e9  # type: ignore[attr-defined]
    assert first.post("/v1/jobs/llm/reports", json=report(num_gpus=4)).is_success
    assert push(first, "n1", [row()]).is_success
    first.app.state.ctx.sample_writer.flush()  # type: ignore[attr-defined]
    second.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
    labels = {"job_id": "llm", "group": "dp", "collective": "AllReduce"}
    assert metric_value(scrape(second), "mfumon_job_collective_seconds_total", **labels) == 20.0


def test_between_profiles_the_comm_ratio_is_inspectors_time_at_the_last_profiles_overlap(client: TestClient) -> None:
    clock = Clock(client)
    assert client.post("/v1/jobs/llm/reports", json=report(num_gpus=4)).is_success
    asked = client.post("/v1/jobs/llm/profile", json={"steps": 3, "ranks": [0, 1]}).json()
    for rank, name in enumerate(("hta_trace_filter_sampled_rank0.json.gz", "hta_trace_filter_sampled_rank1.json.gz")):
        body = _summary(name, rank, profile_id=asked["id"])
        assert client.post("/v1/jobs/llm/profiles", json=body).status_code == 200
    profile = client.get("/v1/jobs/llm/profiles").json()["data"][0]
    overlap = profile["exposed_comm_ratio"] / profile["comm_ratio"]
    assert 0 < overlap < 1
    fresh = client.post("/v1/jobs/llm/reports", json=report(num_gpus=4, comm_seconds=0.1, step_seconds=1.0)).json()
    assert fresh["comm_source"] == "profile"  # a fresh profile sees the overlap itself
    clock.advance(2 * 3600)  # the profile is an hour stale: Inspector's time in collectives, at its overlap
    assert push(client, "n1", [row(window_seconds=8.0)], t=clock.now).is_success  # 8 s over 4 ranks x 10 s
    between = client.post("/v1/jobs/llm/reports", json=report(num_gpus=4, comm_seconds=0.1, step_seconds=1.0)).json()
    assert between["comm_source"] == "inspector"
    assert between["comm_ratio"] == pytest.approx(0.2 * overlap)
    assert client.post("/v1/nodes/n1/samples", json={"timestamp": clock.now + 1, "gpus": [gpu(0)]}).is_success
    hooks = client.post("/v1/jobs/llm/reports", json=report(num_gpus=4, comm_seconds=0.1, step_seconds=1.0)).json()
    assert hooks["comm_source"] == "hooks" and hooks["comm_ratio"] == pytest.approx(0.1)  # no Inspector: the hooks'
