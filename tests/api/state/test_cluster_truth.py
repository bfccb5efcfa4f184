"""Cluster truth through the HTTP API and /metrics: every GPU in one state, reports that claim GPUs no exporter
confirms, the hardware MFU estimate, the best source per job, and the cross-check of reported MFU.

Expected numbers are computed by hand in each test from the counters it sends (H100 SXM dense bf16 peak 989e12).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.mfu import ModelShape, flops_per_token
from tests.utils.factories import LLAMA_7B, gpu, metric_value, report, scrape

H100_BF16 = 989e12
LLAMA_7B_FLOPS_PER_TOKEN = flops_per_token(ModelShape(**LLAMA_7B), "training")


def _node(client: TestClient, name: str, gpus: list[dict[str, Any]], pool: str | None = "train") -> None:
    """Push one node; GPU uuids are made unique per node."""
    for g in gpus:
        g["uuid"] = f"GPU-{name}-{g['index']}"
    body: dict[str, Any] = {"timestamp": 1.7e9, "gpus": gpus}
    if pool:
        body["pool"] = pool
    response = client.post(f"/v1/nodes/{name}/samples", json=body)
    assert response.status_code == 200, response.text


def _gpus(n: int, **counters: Any) -> list[dict[str, Any]]:
    return [gpu(i, **counters) for i in range(n)]


IDLE = {"utilization": 0.0, "sm_active": 0.0, "tensor_active": 0.0, "compute_processes": 0}


def _idle(n: int) -> list[dict[str, Any]]:
    return _gpus(n, **IDLE)


def _tokens_per_second_for(mfu: float, gpus: int) -> float:
    return mfu * gpus * H100_BF16 / LLAMA_7B_FLOPS_PER_TOKEN


def _states(text: str, metric: str = "mfumon_cluster_gpus", **labels: str) -> dict[str, float | None]:
    return {s: metric_value(text, metric, state=s, **labels) for s in ("reporting", "unreported", "idle", "down")}


def test_every_gpu_is_in_exactly_one_state_per_cluster_pool_and_node(client: TestClient) -> None:
    lost = {"uuid": "x", "index": 7, "name": "NVIDIA H100 80GB HBM3", "up": False}
    # a: 4 GPUs of a reporting job, 3 of a job id that never reports, 1 lost
    _node(client, "a", _gpus(4, job_id="wrapped") + [gpu(i, job_id="unwrapped") for i in (4, 5, 6)] + [lost])
    # b: 2 GPUs running processes with no job id, 5 free, 1 free of an unknown model (a count apart, not a state)
    _node(
        client,
        "b",
        [*_gpus(2, compute_processes=3), *(gpu(i, **IDLE) for i in range(2, 7)), gpu(7, name="Mystery GPU", **IDLE)],
        pool="infer",
    )
    _node(client, "c", _idle(2), pool=None)  # a node with no pool counts in the cluster only
    client.post("/v1/jobs/wrapped/reports", json=report(num_gpus=4))

    text = scrape(client)
    assert _states(text) == {"reporting": 4, "unreported": 5, "idle": 8, "down": 1}
    assert _states(text, "mfumon_pool_gpus", pool="train") == {"reporting": 4, "unreported": 3, "idle": 0, "down": 1}
    assert _states(text, "mfumon_pool_gpus", pool="infer") == {"reporting": 0, "unreported": 2, "idle": 6, "down": 0}
    assert metric_value(text, "mfumon_cluster_gpus_unknown_model") == 1
    assert metric_value(text, "mfumon_cluster_reported_coverage_ratio") == pytest.approx(4 / 9)
    assert metric_value(text, "mfumon_pool_reported_coverage_ratio", pool="train") == pytest.approx(4 / 7)
    assert metric_value(text, "mfumon_pool_reported_coverage_ratio", pool="infer") == 0
    # The job nobody registered still shows, from the hardware alone.
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="unwrapped") == 3
    assert metric_value(text, "mfumon_job_gpus_unreported", job_id="unwrapped") == 3
    assert metric_value(text, "mfumon_job_info", job_id="unwrapped", status="unregistered", pool="train") == 1
    assert metric_value(text, "mfumon_gpu_busy", node="b", gpu="0") == 1
    assert metric_value(text, "mfumon_gpu_busy", node="b", gpu="3") == 0
    assert client.get("/v1/nodes/b").json()["gpus"][0]["counters"]["compute_processes"] == 3

    summary = client.get("/v1/cluster").json()
    assert summary["gpus_known"] == 18
    states = [summary[f"gpus_{s}"] for s in ("reporting", "unreported", "idle", "down")]
    assert states == [4, 5, 8, 1] and sum(states) == summary["gpus_known"]
    assert summary["reported_coverage"] == pytest.approx(4 / 9)
    pools = {p["name"]: p for p in summary["pools"]}
    assert set(pools) == {"train", "infer"}
    assert [pools["infer"][f"gpus_{s}"] for s in ("reporting", "unreported", "idle", "down")] == [0, 2, 6, 0]
    nodes = {n["name"]: n for n in client.get("/v1/nodes").json()["data"]}
    assert nodes["a"]["gpu_states"] == {"reporting": 4, "unreported": 3, "idle": 0, "down": 1}
    assert [g["state"] for g in nodes["b"]["gpus"]][:3] == ["unreported", "unreported", "idle"]
    assert client.get("/v1/nodes/a").json()["gpus"][7]["state"] == "down"


def test_gpus_only_a_report_claims_are_unverified_and_change_nothing_else(client: TestClient) -> None:
    """The issue's case: 40 GPUs known, a job claims 8 (then 100) GPUs no exporter has seen."""
    for n in range(5):
        _node(client, f"n{n}", _idle(8))
    before = client.get("/v1/cluster").json()
    assert (before["gpus_known"], before["gpus_idle"]) == (40, 40)

    client.post("/v1/jobs/ghost/reports", json=report(num_gpus=8, pool="ghost-pool"))
    after = client.get("/v1/cluster").json()
    assert (after["gpus_known"], after["gpus_idle"], after["gpus_allocated"]) == (40, 40, 0)
    assert after["gpus_reporting"] == 0 and after["gpus_unverified"] == 8
    assert [p["name"] for p in after["pools"]] == ["train"]  # the report's pool names no node: it creates no pool
    assert after["mfu"] == 0  # the claimed FLOPs ran on no GPU the cluster knows
    job = client.get("/v1/jobs/ghost").json()
    assert (job["gpus_reported"], job["gpus_attributed"], job["gpus_unverified"], job["gpus_allocated"]) == (
        8,
        0,
        8,
        0,
    )

    client.post("/v1/jobs/ghost/reports", json=report(num_gpus=100))
    text = scrape(client)
    assert metric_value(text, "mfumon_job_gpus_unverified", job_id="ghost") == 100
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="ghost") == 0
    assert metric_value(text, "mfumon_cluster_gpus_unverified") == 100
    assert _states(text) == {"reporting": 0, "unreported": 0, "idle": 40, "down": 0}
    assert metric_value(text, "mfumon_pool_gpus", pool="ghost-pool", state="idle") is None


def test_mismatched_gpu_counts_are_visible_and_counted(client: TestClient) -> None:
    gpus = [gpu(i, job_id="short") for i in range(4)] + [gpu(i, job_id="long") for i in range(4, 8)]
    _node(client, "a", gpus)
    client.post("/v1/jobs/short/reports", json=report(num_gpus=8))  # claims 8, exporters see 4
    client.post("/v1/jobs/long/reports", json=report(num_gpus=2))  # claims 2, exporters see 4
    text = scrape(client)
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="short") == 4
    assert metric_value(text, "mfumon_job_gpus_unverified", job_id="short") == 4
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="long") == 4
    assert metric_value(text, "mfumon_job_gpus_unverified", job_id="long") == 0
    assert metric_value(text, "mfumon_cluster_jobs_gpu_mismatch") == 2
    assert _states(text) == {"reporting": 8, "unreported": 0, "idle": 0, "down": 0}
    long = client.get("/v1/jobs/long").json()
    assert (long["gpus_reported"], long["gpus_attributed"], long["gpus_allocated"]) == (2, 4, 4)
    assert client.get("/v1/cluster").json()["jobs_gpu_mismatch"] == 2


def test_hardware_estimate_is_tensor_activity_times_the_clock_ratio(client: TestClient) -> None:
    """Pinned by hand: 0.936 x 1425/1980 = 0.673636..., the H200 bf16 8192^3 calibration point."""
    calibrated = {"tensor_active": 0.936, "sm_clock_hz": 1425e6, "max_sm_clock_hz": 1980e6}
    gpus = [
        gpu(0, job_id="j", **calibrated),
        gpu(1, job_id="j", tensor_active=0.5, sm_clock_hz=1980e6, max_sm_clock_hz=1980e6),  # 0.5
        gpu(2, job_id="j", tensor_active=0.4),  # no clocks: the raw activity, 0.4
        gpu(3, job_id="j"),  # no tensor counter: no estimate, and not a 0 in the mean
        gpu(4, job_id="blind"),
        gpu(5, job_id="blind"),
    ]
    del gpus[3]["tensor_active"]
    for g in gpus[4:]:
        del g["tensor_active"]
    _node(client, "a", gpus)
    text = scrape(client)
    assert metric_value(text, "mfumon_gpu_hardware_mfu_ratio", node="a", gpu="0") == pytest.approx(0.936 * 1425 / 1980)
    assert metric_value(text, "mfumon_gpu_hardware_mfu_ratio", node="a", gpu="3") is None
    expected = (0.936 * 1425 / 1980 + 0.5 + 0.4) / 3
    assert metric_value(text, "mfumon_job_hardware_mfu_ratio", job_id="j") == pytest.approx(expected)
    assert metric_value(text, "mfumon_job_hardware_mfu_ratio", job_id="blind") is None  # never 0
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="blind") == 2
    # Unreported GPUs count in cluster MFU by their estimate; GPUs without one are left out of both sides.
    assert metric_value(text, "mfumon_cluster_mfu_ratio") == pytest.approx(expected)
    assert client.get("/v1/cluster").json()["estimated_flops_per_second"] == pytest.approx(3 * expected * H100_BF16)


def test_cluster_pool_and_team_mfu_use_the_best_source_per_job(client: TestClient) -> None:
    reported_mfu, estimate = 0.40, 0.30
    _node(client, "a", _gpus(8, job_id="wrapped", tensor_active=0.46, sm_clock_hz=1980e6, max_sm_clock_hz=1980e6))
    _node(client, "b", _gpus(8, job_id="bare", tensor_active=estimate, sm_clock_hz=1980e6, max_sm_clock_hz=1980e6))
    _node(client, "c", _idle(8))
    client.put("/v1/jobs/bare", json={"team": "research", "kind": "training"})  # registered, never reports
    result = client.post(
        "/v1/jobs/wrapped/reports",
        json=report(tokens_per_second=_tokens_per_second_for(reported_mfu, 8), team="research"),
    ).json()
    assert result["mfu"] == pytest.approx(reported_mfu)

    text = scrape(client)
    # (0.40 x 8 + 0.30 x 8) peaks over 24 GPUs; allocated: over the 16 busy ones; coverage 8 of 16 busy GPUs
    assert metric_value(text, "mfumon_cluster_mfu_ratio") == pytest.approx((0.40 + 0.30) / 3)
    assert metric_value(text, "mfumon_cluster_allocated_mfu_ratio") == pytest.approx((0.40 + 0.30) / 2)
    assert metric_value(text, "mfumon_pool_mfu_ratio", pool="train") == pytest.approx((0.40 + 0.30) / 3)
    assert metric_value(text, "mfumon_team_mfu_ratio", team="research") == pytest.approx((0.40 + 0.30) / 2)
    assert metric_value(text, "mfumon_cluster_reported_coverage_ratio") == pytest.approx(0.5)
    assert metric_value(text, "mfumon_job_gpus_unreported", job_id="bare") == 8
    assert metric_value(text, "mfumon_job_gpus_unreported", job_id="wrapped") is None
    summary = client.get("/v1/cluster").json()
    assert summary["model_flops_per_second"] == pytest.approx((0.40 + 0.30) * 8 * H100_BF16)
    assert summary["estimated_flops_per_second"] == pytest.approx(0.30 * 8 * H100_BF16)


def test_agreement_ratio_and_the_verdict_in_the_job_json(client: TestClient) -> None:
    """Reported MFU ÷ hardware estimate, by hand: 0.40 / (0.50 x 1485/1980 = 0.375) = 1.0667."""
    clocks = {"sm_clock_hz": 1485e6, "max_sm_clock_hz": 1980e6}
    _node(client, "a", _gpus(8, job_id="honest", tensor_active=0.50, **clocks))
    _node(client, "b", _gpus(8, job_id="bragger", tensor_active=0.20, **clocks))  # estimate 0.15
    _node(client, "c", _gpus(8, job_id="modest", tensor_active=0.80, **clocks))  # estimate 0.60
    for job_id in ("honest", "bragger"):
        client.post(f"/v1/jobs/{job_id}/reports", json=report(tokens_per_second=_tokens_per_second_for(0.40, 8)))
    client.post("/v1/jobs/modest/reports", json=report(tokens_per_second=_tokens_per_second_for(0.24, 8)))

    text = scrape(client)
    assert metric_value(text, "mfumon_job_mfu_hardware_agreement_ratio", job_id="honest") == pytest.approx(0.40 / 0.375)
    assert metric_value(text, "mfumon_job_mfu_hardware_agreement_ratio", job_id="bragger") == pytest.approx(0.40 / 0.15)
    assert metric_value(text, "mfumon_job_mfu_hardware_agreement_ratio", job_id="modest") == pytest.approx(0.24 / 0.60)

    honest = client.get("/v1/jobs/honest").json()
    assert honest["hardware_mfu"] == pytest.approx(0.375)
    assert honest["mfu_hardware_agreement"] == pytest.approx(0.40 / 0.375)
    assert honest["accounting"]["verdict"] == "consistent"
    bragger = client.get("/v1/jobs/bragger").json()["accounting"]
    assert bragger["verdict"] == "over_claims"
    assert "params" in bragger["message"] and "num_gpus" in bragger["message"] and "fp8" in bragger["message"]
    modest = client.get("/v1/jobs/modest").json()["accounting"]
    assert modest["verdict"] == "under_claims" and "recompute" in modest["message"]


def test_fp32_jobs_and_jobs_without_tensor_counters_are_not_judged(client: TestClient) -> None:
    _node(client, "a", _gpus(8, job_id="fp32-job", tensor_active=0.0))
    client.post("/v1/jobs/fp32-job/reports", json=report(dtype="fp32", tokens_per_second=1000.0))
    blind = _gpus(8, job_id="blind")
    for g in blind:
        del g["tensor_active"]
    _node(client, "b", blind)
    client.post("/v1/jobs/blind/reports", json=report())
    text = scrape(client)
    assert metric_value(text, "mfumon_job_mfu_hardware_agreement_ratio", job_id="fp32-job") is None
    assert metric_value(text, "mfumon_job_mfu_hardware_agreement_ratio", job_id="blind") is None
    assert client.get("/v1/jobs/fp32-job").json()["accounting"]["verdict"] == "unchecked"
    assert client.get("/v1/jobs/blind").json()["accounting"]["verdict"] == "unchecked"


def test_each_report_keeps_the_hardware_estimate_of_its_time(client: TestClient) -> None:
    """The history is the cross-check over time: 0.50 x 1485/1980 = 0.375, then 0.80 x 1485/1980 = 0.60; a job
    whose GPUs report no tensor activity keeps None."""
    clocks = {"sm_clock_hz": 1485e6, "max_sm_clock_hz": 1980e6}
    _node(client, "a", _gpus(8, job_id="steady", tensor_active=0.50, **clocks))
    client.post("/v1/jobs/steady/reports", json=report(tokens_per_second=_tokens_per_second_for(0.40, 8)))
    later = _gpus(8, job_id="steady", tensor_active=0.80, **clocks)
    for g in later:
        g["uuid"] = f"GPU-a-{g['index']}"
    assert client.post("/v1/nodes/a/samples", json={"timestamp": 1.7e9 + 10, "gpus": later, "pool": "train"}).is_success
    client.post("/v1/jobs/steady/reports", json=report(tokens_per_second=_tokens_per_second_for(0.45, 8)))
    history = client.get("/v1/jobs/steady", params={"history": 10}).json()["history"]
    assert [h["hardware_mfu"] for h in history] == [pytest.approx(0.375), pytest.approx(0.60)]
    blind = _gpus(8, job_id="blind")
    for g in blind:
        del g["tensor_active"]
    _node(client, "b", blind)
    client.post("/v1/jobs/blind/reports", json=report())
    assert [h["hardware_mfu"] for h in client.get("/v1/jobs/blind").json()["history"]] == [None]
