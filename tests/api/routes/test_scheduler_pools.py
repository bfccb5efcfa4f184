"""Pools as the scheduler defines them (issue 31 #5): ``pools`` in ``PUT /v1/scheduler/{source}``, on SQLite and
PostgreSQL.

The partitions are those of the real Slurm capture
``tests/exporter/scheduler/fixtures/slurm/sinfo-22.05-partitions.json``: ``train`` over gpu-node-1, ``infer`` over
gpu-node-1 and gpu-node-2 (which never starts), hidden ``debug`` over gpu-node-2. Only gpu-node-1's exporter
reports, with ``--pool h100``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import metric_samples, metric_value, node_sample, scrape

PARTITIONS = [
    {"name": "debug", "nodes": ["gpu-node-2"]},
    {"name": "infer", "nodes": ["gpu-node-1", "gpu-node-2"]},
    {"name": "train", "nodes": ["gpu-node-1"]},
]


def _body(jobs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"kind": "slurm", "observed_at": time.time(), "jobs": jobs, **extra}


def _sync(client: TestClient, jobs: list[dict[str, Any]], **extra: Any) -> None:
    response = client.put("/v1/scheduler/slurm", json=_body(jobs, **extra))
    assert response.status_code == 200, response.text


def _pool_gpus(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (name, labels), value in metric_samples(text).items():
        if name == "mfumon_pool_gpus":
            pool = dict(labels)["pool"]
            out[pool] = out.get(pool, 0) + value
    return out


def _running(job_id: str, pool: str, gpus: int) -> dict[str, Any]:
    now = time.time()
    return {
        "job_id": job_id,
        "status": "running",
        "gpus_requested": gpus,
        "gpus_allocated": gpus,
        "placement": {"gpu-node-1": gpus},
        "started_at": now - 60,
        "queued_at": now - 120,
        "pool": pool,
    }


def _queued(job_id: str, pool: str, gpus: int) -> dict[str, Any]:
    now = time.time()
    return {"job_id": job_id, "status": "pending", "gpus_requested": gpus, "queued_at": now - 30, "pool": pool}


def test_overlapping_partitions_each_get_their_nodes_and_the_cluster_counts_a_node_once(client: TestClient) -> None:
    sample = node_sample(8, pool="h100", job_id="1")
    for gpu in sample["gpus"][4:]:
        del gpu["job_id"]
        gpu.update(utilization=0.0, sm_active=0.0, tensor_active=0.0)
    assert client.post("/v1/nodes/gpu-node-1/samples", json=sample).status_code == 200
    _sync(client, [_running("1", "train", 4), _queued("2", "infer", 8)], pools=PARTITIONS)

    text = scrape(client)
    # GPU states over each pool's own nodes: gpu-node-1 is in train and infer, so its 8 GPUs are in both.
    assert _pool_gpus(text) == {"debug": 0, "infer": 8, "train": 8}  # h100 gone: the scheduler lists the node
    assert (
        sum(
            metric_value(text, "mfumon_cluster_gpus", state=s) or 0 for s in ("reporting", "unreported", "idle", "down")
        )
        == 8
    )
    assert metric_value(text, "mfumon_pool_gpus", pool="infer", state="idle") == 4
    assert metric_value(text, "mfumon_pool_gpus", pool="train", state="idle") == 4
    # Requested, queued and satisfaction per pool, over the pool's own jobs.
    assert metric_value(text, "mfumon_pool_gpus_requested", pool="train") == 4
    assert metric_value(text, "mfumon_pool_resource_satisfaction_ratio", pool="train") == 1
    assert metric_value(text, "mfumon_pool_gpus_requested", pool="infer") == 8
    assert metric_value(text, "mfumon_pool_resource_satisfaction_ratio", pool="infer") == 0
    assert metric_value(text, "mfumon_pool_gpus_queued", pool="infer") == 8
    assert metric_value(text, "mfumon_pool_gpus_queued", pool="train") == 0
    assert metric_value(text, "mfumon_pool_free_gpus", pool="infer") == 4  # the shared node's free GPUs, in both
    assert metric_value(text, "mfumon_pool_free_gpus", pool="train") == 4
    assert metric_value(text, "mfumon_pool_gpus_requested", pool="debug") == 0  # listed, no node reports: zeros
    assert metric_value(text, "mfumon_node_info", node="gpu-node-1", pool="h100") == 1  # the exporter's, unchanged

    cluster = client.get("/v1/cluster").json()
    assert cluster["gpus_idle"] + cluster["gpus_reporting"] + cluster["gpus_unreported"] == 8
    pools = {p["name"]: p for p in cluster["pools"]}
    assert sorted(pools) == ["debug", "infer", "train"]
    assert (pools["infer"]["gpus_requested"], pools["infer"]["resource_satisfaction"]) == (8, 0)
    sources = client.get("/v1/scheduler").json()["data"]
    assert [(s["name"], s["pools"]) for s in sources] == [("slurm", ["debug", "infer", "train"])]


def test_without_pools_in_the_sync_the_exporters_pool_is_the_source_again(client: TestClient) -> None:
    assert client.post("/v1/nodes/gpu-node-1/samples", json=node_sample(8, pool="h100")).status_code == 200
    _sync(client, [], pools=PARTITIONS)
    assert sorted(_pool_gpus(scrape(client))) == ["debug", "infer", "train"]
    _sync(client, [])  # an adapter run with --pools exporters (or an older one): no pools field
    assert _pool_gpus(scrape(client)) == {"h100": 8}
    assert client.get("/v1/scheduler").json()["data"][0]["pools"] is None


def test_a_node_no_partition_lists_keeps_its_exporters_pool(client: TestClient) -> None:
    assert client.post("/v1/nodes/gpu-node-1/samples", json=node_sample(8, pool="h100")).status_code == 200
    assert client.post("/v1/nodes/login-1/samples", json=node_sample(2, pool="interactive")).status_code == 200
    _sync(client, [], pools=[{"name": "train", "nodes": ["gpu-node-1"]}])
    assert _pool_gpus(scrape(client)) == {"interactive": 2, "train": 8}


@pytest.mark.parametrize(
    ("pools", "message"),
    [
        ([{"name": "train", "nodes": ["a"]}, {"name": "train", "nodes": ["b"]}], "pool names must be unique"),
        ([{"name": "train", "nodes": ["a"]}, {"name": " train ", "nodes": ["b"]}], "pool names must be unique"),
        ([{"name": "train", "nodes": ["a", "a"]}], "each node once"),
        ([{"name": "train", "nodes": ["bad name"]}], "pattern"),
        ([{"name": "train", "nodes": "gpu-node-1"}], "list"),
        ([{"name": "", "nodes": []}], "name"),
        ([{"name": "train"}], "nodes"),
        ([{"name": "train", "nodes": [], "partition": "x"}], "partition"),
        ({"train": ["a"]}, "list"),
        ([{"name": "train", "nodes": [7]}], "string"),
    ],
)
def test_a_bad_pools_field_is_a_clear_422_that_changes_nothing(client: TestClient, pools: Any, message: str) -> None:
    _sync(client, [], pools=PARTITIONS)
    response = client.put("/v1/scheduler/slurm", json=_body([], pools=pools))
    assert response.status_code == 422, response.text
    assert message in response.text
    assert client.get("/v1/scheduler").json()["data"][0]["pools"] == ["debug", "infer", "train"]


def test_pools_null_is_the_same_as_absent(client: TestClient) -> None:
    _sync(client, [], pools=PARTITIONS)
    _sync(client, [], pools=None)
    assert client.get("/v1/scheduler").json()["data"][0]["pools"] is None
