"""Delivery to a real ``mfumon serve``: nothing is lost while the aggregator is down, and order is kept."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from mfumon.exporter.node.pipeline import Agent
from mfumon.exporter.node.push import RetryPolicy, Sender
from mfumon.exporter.node.selfmetrics import ExporterMetrics
from mfumon.exporter.node.sources.sim import SimSource, SimWorkload
from mfumon.exporter.node.spool import DiskSpool, MemorySpool
from mfumon.exporter.samples import GpuSample, NodeBatch
from tests.conftest import LiveServer, start_server


def _wait_for(condition: Callable[[], bool], timeout_seconds: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _accepted(server: LiveServer) -> float:
    """``mfumon_ingest_requests_total{endpoint="node_samples",outcome="accepted"}`` on the aggregator."""
    for line in httpx.get(f"{server.url}/metrics", timeout=5).text.splitlines():
        wanted = 'endpoint="node_samples"' in line and 'outcome="accepted"' in line
        if line.startswith("mfumon_ingest_requests_total{") and wanted:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_retry_policy_backs_off_exponentially_with_jitter() -> None:
    policy = RetryPolicy(initial_seconds=0.5, max_seconds=8.0)
    rng = random.Random(1)
    for failures in range(1, 12):
        ceiling = min(8.0, 0.5 * 2 ** (failures - 1))
        delays = [policy.delay(failures, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jittered, so nodes do not retry in lockstep


def test_every_batch_arrives_after_the_aggregator_comes_back(tmp_path: Path, held_port: int) -> None:
    port = held_port
    database_url = f"sqlite:///{tmp_path / 'aggregator.db'}"
    node = "node-outage"
    metrics = ExporterMetrics()
    sender = Sender(
        f"http://127.0.0.1:{port}",
        DiskSpool(tmp_path / "spool", 1024**2),
        metrics=metrics,
        # Generous: a push that times out on a loaded machine after the server applied it is sent again, and the
        # exact counts below would see it twice (delivery is at least once).
        timeout_seconds=30.0,
        retry=RetryPolicy(initial_seconds=0.05, max_seconds=0.3),
        seed=0,
    )
    source = SimSource(node=node, count=2, workload=SimWorkload(profile="training", target_mfu=0.4, job_id="j1"))
    agent = Agent(source=source, sender=sender, node=node, interval_seconds=0.1, metrics=metrics)

    def collections() -> float:
        return metrics.registry.get_sample_value("mfumon_exporter_collections_total") or 0.0

    with start_server(tmp_path, port=port, database_url=database_url) as first:
        agent.start()
        _wait_for(lambda: sender.delivered >= 3, what="first deliveries")
        assert _accepted(first) >= 3
    # The aggregator is down: collection goes on, batches wait in the spool.
    delivered_before = sender.delivered
    before_outage = collections()
    _wait_for(lambda: len(sender.spool) >= 8, what="batches to spool up")
    assert collections() >= before_outage + 3  # collection never waited on the dead aggregator
    assert metrics.registry.get_sample_value("mfumon_exporter_push_total", {"outcome": "error"}) >= 1
    assert metrics.registry.get_sample_value("mfumon_exporter_spool_batches") == len(sender.spool)

    with start_server(tmp_path, port=port, database_url=database_url) as second:
        _wait_for(lambda: len(sender.spool) == 0, what="the spool to drain")
        agent.stop()
        collected = collections()
        node_view = httpx.get(f"{second.url}/v1/nodes/{node}", timeout=5).json()
        accepted_after = _accepted(second)
    assert collected >= 12
    assert node_view["samples_received"] == collected
    assert sender.delivered == collected
    assert accepted_after == collected - delivered_before  # the restarted aggregator got exactly the rest
    assert metrics.registry.get_sample_value("mfumon_exporter_spool_dropped_total") == 0
    # Replayed in order: the newest batch collected is the one the aggregator shows last.
    assert node_view["last_timestamp"] == pytest.approx(
        metrics.registry.get_sample_value("mfumon_exporter_last_collection_timestamp_seconds")
    )
    assert [g["job_id"] for g in node_view["gpus"]] == ["j1", "j1"]


def test_invalid_batches_are_dropped_not_retried(live_server: LiveServer) -> None:
    metrics = ExporterMetrics()
    sender = Sender(live_server.url, MemorySpool(1024**2), metrics=metrics, retry=RetryPolicy(initial_seconds=0.05))
    sender.start()
    bad = GpuSample(uuid="GPU-bad", index=0, name="x" * 500)  # longer than the aggregator accepts
    good = GpuSample(uuid="GPU-good", index=0, name="NVIDIA H100 80GB HBM3", utilization=0.5)
    sender.submit(NodeBatch(node="node-r", timestamp=time.time(), gpus=(bad,)))
    sender.submit(NodeBatch(node="node-r", timestamp=time.time(), gpus=(good,)))
    _wait_for(lambda: sender.delivered == 1, what="the valid batch")
    sender.stop()
    assert metrics.registry.get_sample_value("mfumon_exporter_push_total", {"outcome": "rejected"}) == 1
    assert metrics.registry.get_sample_value("mfumon_exporter_push_total", {"outcome": "error"}) == 0
    assert len(sender.spool) == 0
    gpus = httpx.get(f"{live_server.url}/v1/nodes/node-r", timeout=5).json()["gpus"]
    assert [(g["uuid"], g["counters"]) for g in gpus] == [("GPU-good", {"utilization": 0.5})]
