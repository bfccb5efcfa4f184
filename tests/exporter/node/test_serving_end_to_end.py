"""Real engines' /metrics through the node agent into a live aggregator (issue 55): the SLO goodput, the latency
percentiles and the serving job's page come out of what vLLM 0.28.0, SGLang 0.4 and TGI 3.3.5 printed.

No source published two scrapes of one server, so each capture is paired with "the same process before its first
request" (every counter and histogram at zero, the gauges as printed): the interval is the capture's whole life.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from mfumon.exporter.node.inference.collector import InferenceCollector
from mfumon.exporter.node.inference.endpoints import parse_endpoint
from tests.conftest import LiveServer
from tests.exporter.node.test_inference_collector import EngineServer, ticking
from tests.utils.factories import metric_value

_CUMULATIVE = re.compile(r"^(?!#)(\S+?(?:_total|_bucket|_count|_sum)(?:\{[^}]*\})?) \S+$", re.MULTILINE)
GPU = "num_gpus=1,gpu_model=NVIDIA H100 80GB HBM3"
SHAPE = "params=27e9,layers=64,heads=40,kv_heads=8,head_dim=128"


class CapturePair(EngineServer):
    """Serves a capture's "before its first request" text, then the capture itself."""

    def __init__(self, name: str) -> None:
        super().__init__([name, name])
        self.texts[0] = _CUMULATIVE.sub(r"\1 0", self.texts[1])


@pytest.fixture
def report_of(live_server: LiveServer) -> Iterator[object]:
    servers: list[CapturePair] = []

    def run(name: str, job_id: str) -> dict[str, object]:
        server = CapturePair(name)
        servers.append(server)
        endpoint = parse_endpoint(f"{server.url},job_id={job_id},{SHAPE},{GPU}")
        collector = InferenceCollector(url=live_server.url, endpoints=[endpoint], node="n1", clock=ticking())
        try:
            assert collector.collect_once() == []
            (sent,) = collector.collect_once()
        finally:
            collector.stop()
        return sent

    yield run
    for server in servers:
        server.close()


def test_vllm_0_28_goodput_from_its_own_histograms(report_of: object, live_server: LiveServer) -> None:
    sent = report_of("real-vllm-0.28.0-v1engine-qwen27b.prom", "qwen-27b")  # type: ignore[operator]
    assert sent["engine"] == "vllm" and sent["ttft_histogram"]["count"] == 1579
    job = httpx.get(f"{live_server.url}/v1/jobs/qwen-27b").json()
    good = job["serving"]["slo_goodput"]
    # The capture: 1,176 of 1,579 first tokens within 1.0 s, 1,570 of 1,578 requests within 0.1 s per output
    # token, both targets bucket edges (vLLM's defaults), so each share is exact and only the joint is bounded.
    ttft, tpot = 1176 / 1579, 1570 / 1578
    assert good["ttft_met_ratio"] == pytest.approx([ttft, ttft])
    assert good["tpot_met_ratio"] == pytest.approx([tpot, tpot])
    assert good["ratio"] == pytest.approx(ttft + tpot - 1)  # 73.97 %
    assert good["upper_ratio"] == pytest.approx(ttft)  # 74.48 %
    assert job["slo_goodput_ratio"] == pytest.approx(ttft + tpot - 1)
    assert job["serving"]["preemptions"] == 197
    # TTFT p50: rank 789.5 of 1,579 falls in (0.25, 0.5] holding ranks 206..822 (the capture's buckets)
    latency = job["serving"]["latency"]
    assert 0.25 < latency["ttft_p50"] < 0.5
    text = httpx.get(f"{live_server.url}/metrics").text
    labels = {"job_id": "qwen-27b", "kind": "inference"}
    assert metric_value(text, "mfumon_job_slo_goodput_ratio", **labels) == pytest.approx(ttft + tpot - 1)
    assert metric_value(text, "mfumon_job_slo_goodput_upper_ratio", **labels) == pytest.approx(ttft)
    assert metric_value(text, "mfumon_job_slo_target_seconds", target="ttft", **labels) == 1.0

    page = httpx.get(f"{live_server.url}/ui/jobs/qwen-27b").text
    assert "74.0 %" in page and "74.5 %" in page  # the goodput's bounds, as the page prints them
    assert "Goodput (step time" not in page
    diagnosis = httpx.get(f"{live_server.url}/v1/jobs/qwen-27b/diagnosis").json()
    causes = {finding["cause"]: finding for finding in diagnosis["findings"]}
    assert "slo_misses" in causes  # at most 74.5 % met both, objective 90 %
    assert causes["slo_misses"]["evidence"]["goodput_ratio"] == pytest.approx([ttft + tpot - 1, ttft], abs=1e-4)
    assert not {"exposed_communication", "data_loading", "pipeline_bubbles", "stalled"} & set(causes)


def test_tgi_3_3_has_no_goodput_and_says_why(report_of: object, live_server: LiveServer) -> None:
    sent = report_of("real-tgi-3.3.5-intel-cpu-openhermes7b.prom", "hermes-7b")  # type: ignore[operator]
    assert "ttft_histogram" not in sent and sent["tpot_histogram"]["count"] == 109
    job = httpx.get(f"{live_server.url}/v1/jobs/hermes-7b").json()
    good = job["serving"]["slo_goodput"]
    assert good["ratio"] is None and "TGI exports no time-to-first-token histogram" in good["reason"]
    # TGI's edges are 1.5^k x 1e-4 s: the 0.1 s target lies in (0.0985, 0.1478], holding none of the 109
    assert good["tpot_met_ratio"] == [1.0, 1.0]
    text = httpx.get(f"{live_server.url}/metrics").text
    assert metric_value(text, "mfumon_job_slo_goodput_ratio", job_id="hermes-7b") is None
    page = httpx.get(f"{live_server.url}/ui/jobs/hermes-7b").text
    assert "TGI exports no time-to-first-token histogram" in page


def test_sglang_0_4_sends_ttft_but_no_request_tpot(report_of: object, live_server: LiveServer) -> None:
    sent = report_of("real-sglang-0.4-docs-llama8b.prom", "llama-8b")  # type: ignore[operator]
    assert sent["ttft_histogram"]["count"] > 0 and "tpot_histogram" not in sent
    good = httpx.get(f"{live_server.url}/v1/jobs/llama-8b").json()["serving"]["slo_goodput"]
    assert good["ratio"] is None and "time-per-output-token" in good["reason"]
