"""Self-metrics and the exporter's own HTTP endpoint; the collection loop's accounting."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mfumon.exporter.errors import SourceUnavailable
from mfumon.exporter.node.pipeline import Agent
from mfumon.exporter.node.push import Sender
from mfumon.exporter.node.selfmetrics import ExporterMetrics, MetricsServer, parse_listen_address
from mfumon.exporter.node.sources.sim import SimSource
from mfumon.exporter.node.spool import MemorySpool
from mfumon.exporter.samples import GpuSample


def test_parse_listen_address() -> None:
    assert parse_listen_address(":9428") == ("", 9428)
    assert parse_listen_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_listen_address("[::1]:9428") == ("::1", 9428)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen_address("9428")


def test_server_serves_metrics_and_health() -> None:
    metrics = ExporterMetrics()
    metrics.collections.inc(3)
    state: dict[str, Any] = {"ok": True}
    server = MetricsServer("127.0.0.1:0", metrics, lambda: (state["ok"], {"node": "n1"}))
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        text = httpx.get(f"{base}/metrics").text
        assert "mfumon_exporter_collections_total 3.0" in text
        for name in ("push_total", "spool_batches", "spool_dropped_total", "collector_errors_total", "gpus"):
            assert f"mfumon_exporter_{name}" in text
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok", "node": "n1"}
        state["ok"] = False
        failing = httpx.get(f"{base}/healthz")
        assert failing.status_code == 503 and failing.json()["status"] == "failing"
        assert httpx.get(f"{base}/nope").status_code == 404
    finally:
        server.stop()


class _FlakySource:
    """A source whose collect() raises on demand and whose device reads sometimes fail."""

    name = "flaky"

    def __init__(self) -> None:
        self.error_count = 0
        self.fail = False
        self._sim = SimSource(node="n1", count=2)

    def collect(self) -> list[GpuSample]:
        if self.fail:
            raise SourceUnavailable("dcgm-exporter went away")
        self.error_count += 2  # two counter reads failed this cycle
        samples = self._sim.collect()
        return [samples[0], samples[1].lost()]

    def close(self) -> None:
        pass


def test_collection_cycles_are_counted_and_failures_never_stop_the_loop() -> None:
    metrics = ExporterMetrics()
    source = _FlakySource()
    sender = Sender("http://127.0.0.1:9", MemorySpool(1024**2), metrics=metrics)
    agent = Agent(source=source, sender=sender, node="n1", interval_seconds=60, metrics=metrics)
    first = agent.collect_once()
    assert first is not None and len(first.gpus) == 2
    source.fail = True
    assert agent.collect_once() is None
    source.fail = False
    agent.collect_once()
    value = metrics.registry.get_sample_value
    assert value("mfumon_exporter_collections_total") == 2
    assert value("mfumon_exporter_collector_errors_total") == 2 + 1 + 2
    assert value("mfumon_exporter_gpus", {"state": "up"}) == 1
    assert value("mfumon_exporter_gpus", {"state": "lost"}) == 1
    assert value("mfumon_exporter_collection_duration_seconds_count") == 2
    ok, info = agent.health()
    assert ok and info["source"] == "flaky" and info["seconds_since_collection"] is not None
