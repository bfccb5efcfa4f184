"""Node samples: GPU series, idle capacity, replays, expiry, MIG and lost GPUs."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import gpu, metric_value, node_sample, report, scrape


def test_sample_becomes_gpu_series_and_node_view(client: TestClient) -> None:
    body = node_sample(2, job_id="j1", throttle_reasons=["hw_thermal"])
    body["gpus"][1].pop("tensor_active")  # not supported on this GPU: must stay absent, never 0
    assert client.post("/v1/nodes/gpu-node-1/samples", json=body).json() == {"accepted": 2, "applied": True}
    text = scrape(client)
    labels = {"node": "gpu-node-1", "gpu": "0", "uuid": body["gpus"][0]["uuid"]}
    assert metric_value(text, "mfumon_gpu_tensor_active_ratio", **labels) == 0.45
    assert metric_value(text, "mfumon_gpu_tensor_active_ratio", node="gpu-node-1", gpu="1") is None
    assert metric_value(text, "mfumon_gpu_power_watts", **labels) == 550
    assert metric_value(text, "mfumon_gpu_memory_used_bytes", **labels) == 60e9
    assert metric_value(text, "mfumon_gpu_throttled", reason="thermal", **labels) == 1
    assert metric_value(text, "mfumon_gpu_throttled", reason="power", **labels) == 0
    info = metric_value(text, "mfumon_gpu_info", model="NVIDIA H100 80GB HBM3", job_id="j1", mig_profile="", **labels)
    assert info == 1
    assert metric_value(text, "mfumon_node_last_seen_timestamp_seconds", node="gpu-node-1") is not None
    node = client.get("/v1/nodes/gpu-node-1").json()
    assert node["samples_received"] == 1 and node["pool"] == "train"
    assert node["gpus"][0]["device"] == "h100-sxm" and "tensor_active" not in node["gpus"][1]["counters"]


def test_idle_gpus_count_in_cluster_mfu(client: TestClient) -> None:
    client.post("/v1/nodes/a/samples", json=node_sample(8, job_id="busy"))
    client.post("/v1/nodes/b/samples", json=node_sample(8, compute_processes=0))  # idle node
    result = client.post("/v1/jobs/busy/reports", json=report()).json()
    text = scrape(client)
    assert metric_value(text, "mfumon_cluster_mfu_ratio") == pytest.approx(result["mfu"] / 2)
    assert metric_value(text, "mfumon_cluster_allocated_mfu_ratio") == pytest.approx(result["mfu"])
    assert metric_value(text, "mfumon_cluster_gpus", state="idle") == 8
    assert metric_value(text, "mfumon_cluster_gpus", state="reporting") == 8
    assert metric_value(text, "mfumon_pool_mfu_ratio", pool="train") == pytest.approx(result["mfu"] / 2)
    summary = client.get("/v1/cluster").json()
    assert summary["mfu"] == pytest.approx(result["mfu"] / 2) and summary["gpus_known"] == 16


def test_older_replayed_sample_counts_but_does_not_overwrite(client: TestClient) -> None:
    new = node_sample(1, power_watts=600.0)
    old = node_sample(1, power_watts=100.0)
    old["timestamp"] = new["timestamp"] - 60
    client.post("/v1/nodes/n/samples", json=new)
    assert client.post("/v1/nodes/n/samples", json=old).json()["applied"] is False
    node = client.get("/v1/nodes/n").json()
    assert node["samples_received"] == 2
    assert node["gpus"][0]["counters"]["power_watts"] == 600.0


def test_gpus_that_leave_a_node_disappear(client: TestClient) -> None:
    client.post("/v1/nodes/n/samples", json=node_sample(4))
    client.post("/v1/nodes/n/samples", json=node_sample(2))
    assert len(client.get("/v1/nodes/n").json()["gpus"]) == 2
    assert 'gpu="3"' not in scrape(client)


def test_lost_gpu_is_down_without_counters(client: TestClient) -> None:
    body = node_sample(2)
    body["gpus"][1] = {
        "uuid": body["gpus"][1]["uuid"],
        "index": 1,
        "name": "NVIDIA H100 80GB HBM3",
        "up": False,
    }
    client.post("/v1/nodes/n/samples", json=body)
    text = scrape(client)
    assert metric_value(text, "mfumon_gpu_up", node="n", gpu="1") == 0
    assert metric_value(text, "mfumon_gpu_power_watts", node="n", gpu="1") is None
    assert metric_value(text, "mfumon_cluster_gpus", state="down") == 1


def test_mig_slices_count_their_fraction_of_idle_peak(client: TestClient) -> None:
    slices = [gpu(i, uuid=f"MIG-{i}", name="NVIDIA A100-SXM4-80GB", mig_profile="1g.10gb") for i in range(7)]
    client.post("/v1/nodes/mig/samples", json={"timestamp": 1.7e9, "gpus": slices})
    peak = client.get("/v1/cluster").json()["peak_flops_per_second"]
    assert peak == pytest.approx(312e12)  # seven 1g slices make one A100


def test_unknown_gpu_model_is_counted_not_guessed(client: TestClient) -> None:
    client.post("/v1/nodes/n/samples", json={"timestamp": 1.7e9, "gpus": [gpu(0, name="Mystery GPU")]})
    text = scrape(client)
    assert metric_value(text, "mfumon_cluster_gpus_unknown_model") == 1
    assert metric_value(text, "mfumon_cluster_peak_flops_per_second") == 0


def test_silent_node_series_vanish_after_ttl(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client(NODE_TTL_SECONDS=30)
    client.post("/v1/nodes/gone/samples", json=node_sample(2))
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    real_clock = ctx.clock
    ctx.clock = lambda: real_clock() + 31
    text = scrape(client)
    assert 'node="gone"' not in text
    assert metric_value(text, "mfumon_cluster_gpus", state="idle") == 0
    assert client.get("/v1/nodes").json()["count"] == 0


def test_job_moving_between_nodes_is_attributed_to_its_current_nodes(client: TestClient) -> None:
    client.post("/v1/nodes/a/samples", json=node_sample(8, job_id="mover"))
    body = report()
    del body["num_gpus"]
    assert client.post("/v1/jobs/mover/reports", json=body).json()["num_gpus"] == 8
    client.post("/v1/nodes/a/samples", json=node_sample(8))  # the job left node a ...
    sample_b = node_sample(4, job_id="mover")
    for g in sample_b["gpus"]:
        g["uuid"] = g["uuid"].replace("GPU-", "GPU-B")
    client.post("/v1/nodes/b/samples", json=sample_b)  # ... and now holds 4 GPUs on node b
    assert client.post("/v1/jobs/mover/reports", json=body).json()["num_gpus"] == 4


def test_replayed_sample_on_a_replica_without_the_node_never_overwrites_the_stored_newer_one(
    client: TestClient,
) -> None:
    new = node_sample(2, power_watts=600.0)
    client.post("/v1/nodes/r/samples", json=new)
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    ctx.sample_writer.flush()
    ctx.state._nodes.clear()  # as on a replica that has not loaded node r yet
    ctx.state._job_nodes.clear()
    old = node_sample(2, power_watts=100.0)
    old["timestamp"] = new["timestamp"] - 60
    assert client.post("/v1/nodes/r/samples", json=old).status_code == 200
    ctx.sample_writer.flush()  # the database keeps the newer sample, and counts both pushes
    ctx.refresher.load_rows(nodes=["r"])  # what the other replica's notification makes this one do
    node = client.get("/v1/nodes/r").json()
    assert len(node["gpus"]) == 2 and node["gpus"][0]["counters"]["power_watts"] == 600.0
    assert node["samples_received"] == 2
