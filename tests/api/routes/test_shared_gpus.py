"""Shared GPUs through the API (issue 35): each job gets its share of a GPU that several jobs use, on both databases.

Hand-computed: node ``n1`` has GPU 0 shared by job ``a`` (0.75) and job ``b`` (0.25), tensor activity 0.40, and
GPU 1 held by ``a`` alone, tensor activity 0.20.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.services.remediation_cost import node_gpus
from tests.utils.clock import Clock
from tests.utils.factories import gpu, metric_value, node_view, report, scrape


def _shared_sample(method: str = "process_utilization") -> dict[str, Any]:
    shares = [{"job_id": "a", "share": 0.75, "method": method}, {"job_id": "b", "share": 0.25, "method": method}]
    return {
        "timestamp": 1.8e9,
        "pool": "train",
        "gpus": [
            gpu(0, job_id="a", tensor_active=0.40, compute_processes=3, shares=shares),
            gpu(1, job_id="a", tensor_active=0.20, compute_processes=1),
        ],
    }


def _report(num_gpus: int) -> dict[str, Any]:
    body = {**report(num_gpus=num_gpus), "tokens": 100_000, "interval_seconds": 30.0}
    del body["tokens_per_second"]
    return body


def _waterfall_total(job: dict[str, Any]) -> float:
    return sum(row["gpu_seconds"] for row in job["waterfall"])


def test_a_shared_gpu_is_attributed_to_each_job_by_its_share(client: TestClient) -> None:
    clock = Clock(client)
    assert client.post("/v1/nodes/n1/samples", json=_shared_sample()).status_code == 200
    for job_id, gpus in (("a", 2), ("b", 1)):
        client.post(f"/v1/jobs/{job_id}/reports", json=_report(gpus))
    clock.advance(30)
    for job_id, gpus in (("a", 2), ("b", 1)):
        client.post(f"/v1/jobs/{job_id}/reports", json=_report(gpus))

    a, b = client.get("/v1/jobs/a").json(), client.get("/v1/jobs/b").json()
    assert (a["gpus_attributed"], a["gpus_shared"], a["gpu_share"], a["share_method"]) == (
        2,
        1,
        pytest.approx(1.75),
        "process_utilization",
    )
    assert (b["gpus_attributed"], b["gpus_shared"], b["gpu_share"], b["share_method"]) == (
        1,
        1,
        pytest.approx(0.25),
        "process_utilization",
    )
    # The hardware estimate leaves out the other job's work: a = (0.40 x 0.75 + 0.20) / 2, b = 0.40 x 0.25.
    assert a["hardware_mfu"] == pytest.approx(0.25)
    assert b["hardware_mfu"] == pytest.approx(0.10)
    shared_entry = next(g for g in b["gpus"] if g["gpu"] == 0)
    assert (shared_entry["share"], shared_entry["share_method"], shared_entry["jobs"]) == (
        0.25,
        "process_utilization",
        2,
    )
    assert [g["gpu"] for g in a["gpus"]] == [0, 1] and [g["gpu"] for g in b["gpus"]] == [0]
    # GPU-seconds by share: each report's first tile is the 30 s it covers, the second the 30 s since.
    assert _waterfall_total(a) == pytest.approx(1.75 * 60)
    assert _waterfall_total(b) == pytest.approx(0.25 * 60)  # two GPUs' worth between them, not three

    text = scrape(client)
    uuid0, uuid1 = gpu(0)["uuid"], gpu(1)["uuid"]
    assert metric_value(text, "mfumon_gpu_jobs", node="n1", gpu="0", uuid=uuid0) == 2
    assert metric_value(text, "mfumon_gpu_jobs", node="n1", gpu="1", uuid=uuid1) == 1
    assert metric_value(text, "mfumon_cluster_gpus", state="reporting") == 2  # the shared GPU is in one state

    # Stored as pushed: a replica that reads the node back from the database splits it the same way.
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    ctx.sample_writer.flush()
    ctx.state._nodes.clear()
    ctx.state._job_nodes.clear()
    ctx.refresher.load_rows(nodes=["n1"])
    assert client.get("/v1/jobs/b").json()["gpu_share"] == pytest.approx(0.25)


def test_old_exporters_without_shares_are_attributed_whole(client: TestClient) -> None:
    Clock(client)
    sample = _shared_sample()
    del sample["gpus"][0]["shares"]
    assert client.post("/v1/nodes/n1/samples", json=sample).status_code == 200
    client.post("/v1/jobs/a/reports", json=_report(2))
    a = client.get("/v1/jobs/a").json()
    assert (a["gpus_attributed"], a["gpus_shared"], a["gpu_share"], a["share_method"]) == (2, 0, 2.0, None)
    assert a["hardware_mfu"] == pytest.approx(0.30)
    assert metric_value(scrape(client), "mfumon_gpu_jobs", node="n1", gpu="0", uuid=gpu(0)["uuid"]) == 1


@pytest.mark.parametrize(
    ("shares", "field"),
    [
        (
            [{"job_id": "a", "share": 0.5, "method": "equal_split"}, {"job_id": "b", "share": 0.4, "method": "x"}],
            "method",
        ),
        (
            [
                {"job_id": "a", "share": 0.7, "method": "accounting"},
                {"job_id": "b", "share": 0.2, "method": "accounting"},
            ],
            "add up",
        ),
        (
            [
                {"job_id": "a", "share": 0.5, "method": "accounting"},
                {"job_id": "a", "share": 0.5, "method": "accounting"},
            ],
            "more than once",
        ),
        (
            [
                {"job_id": "c", "share": 0.5, "method": "accounting"},
                {"job_id": "b", "share": 0.5, "method": "accounting"},
            ],
            "not among",
        ),
        ([{"job_id": "a", "share": 1.0, "method": "accounting"}], "at least 2"),
    ],
)
def test_bad_shares_are_refused_and_change_nothing(
    client: TestClient, shares: list[dict[str, Any]], field: str
) -> None:
    Clock(client)  # the sample's timestamp is the aggregator's now: only the shares are wrong
    sample = _shared_sample()
    sample["gpus"][0]["shares"] = shares
    answer = client.post("/v1/nodes/n1/samples", json=sample)
    assert answer.status_code == 422 and field in answer.text
    assert client.get("/v1/nodes").json()["count"] == 0


def test_a_mig_instance_is_never_shared(client: TestClient) -> None:
    Clock(client)
    sample = _shared_sample()
    sample["gpus"][0]["mig_profile"] = "3g.40gb"
    answer = client.post("/v1/nodes/n1/samples", json=sample)
    assert answer.status_code == 422 and "MIG instance is not shared" in answer.text


def test_a_shared_gpu_is_one_busy_gpu_to_the_capacity_sums() -> None:
    view = node_view(_shared_sample())
    assert view.shared == (("a", "b"),)
    assert node_gpus(view) == (2, 2)  # GPU 0 (two jobs) once, GPU 1
