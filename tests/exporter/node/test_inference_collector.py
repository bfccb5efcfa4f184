"""The inference collector end to end: engine /metrics text -> reports -> a real aggregator, restart included."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from mfumon.exporter.node.inference.collector import InferenceCollector
from mfumon.exporter.node.inference.endpoints import parse_endpoint
from tests.conftest import LiveServer
from tests.utils.factories import metric_value

FIXTURES = Path(__file__).parent / "fixtures" / "inference"
SHAPE_70B = "params=70e9,layers=80,heads=64,kv_heads=8,head_dim=128"


class EngineServer:
    """Serves fixture files as /metrics, one per scrape, in order (the last one repeats)."""

    def __init__(self, files: list[str]) -> None:
        self.texts = [(FIXTURES / name).read_text() for name in files]
        self.scrapes = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                text = server.texts[min(server.scrapes, len(server.texts) - 1)]
                server.scrapes += 1
                body = text.encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def engine() -> Iterator[EngineServer]:
    server = EngineServer(["vllm-v0.9-v1engine-a.prom", "vllm-v0.9-v1engine-b.prom", "vllm-v0.9-v1engine-restart.prom"])
    yield server
    server.close()


def ticking(step: float = 10.0) -> Any:
    times = iter(range(0, 10_000, int(step)))
    return lambda: float(next(times))


def test_reports_reach_the_aggregator_and_survive_an_engine_restart(
    live_server: LiveServer, engine: EngineServer
) -> None:
    endpoint = parse_endpoint(f"{engine.url},job_id=chat-70b,{SHAPE_70B},num_gpus=8,gpu_model=NVIDIA H100 80GB HBM3")
    collector = InferenceCollector(url=live_server.url, endpoints=[endpoint], node="n1", clock=ticking())
    try:
        assert collector.collect_once() == []  # the first reading only sets the baseline
        (first,) = collector.collect_once()
        (after_restart,) = collector.collect_once()
    finally:
        collector.stop()
    assert first["prefill_tokens"] == 32_000 and first["decode_tokens"] == 20_000
    assert after_restart["decode_tokens"] == 350  # counted from zero after the restart, not negative
    assert collector.metrics.inference_restarts._value.get() == 1

    job = httpx.get(f"{live_server.url}/v1/jobs/chat-70b").json()
    assert job["kind"] == "inference" and job["reports_received"] == 2
    decode_rates = [entry["decode_tokens_per_second"] for entry in job["history"]]
    assert decode_rates == [2_000, 35]
    # MBU of the first interval: batch 32, context 0.41 x 160,000 / 32 = 2,050 tokens, 2,000 decode tokens/s:
    # (140e9 + 32 x 2,050 x 327,680) x 2,000 / 32 / (8 x 3.35e12)
    expected_mbu = (140e9 + 32 * 2_050 * 327_680) * 2_000 / 32 / 26.8e12
    assert job["history"][0]["mbu"] == pytest.approx(expected_mbu)
    text = httpx.get(f"{live_server.url}/metrics").text
    assert metric_value(text, "mfumon_job_requests_running", job_id="chat-70b") == 2
    assert metric_value(text, "mfumon_job_phase_tokens_per_second", job_id="chat-70b", phase="decode") == 35


def _tgi_finished_more(text: str, requests: int, prompt_tokens: int, generated_tokens: int) -> str:
    """A later TGI scrape: ``requests`` more finished, with these tokens (the histograms' _count and _sum grow)."""

    def grow(text: str, name: str, by: float) -> str:
        head, _, rest = text.partition(f"\n{name} ")
        value, _, tail = rest.partition("\n")
        return f"{head}\n{name} {float(value) + by:g}\n{tail}"

    for name, by in (
        ("tgi_request_input_length_count", requests),
        ("tgi_request_input_length_sum", prompt_tokens),
        ("tgi_request_generated_tokens_count", requests),
        ("tgi_request_generated_tokens_sum", generated_tokens),
    ):
        text = grow(text, name, by)
    return text


_TGI_B = (FIXTURES / "tgi-3.3.6-b.prom").read_text()
_TGI_C = _tgi_finished_more(_TGI_B, requests=10, prompt_tokens=8_000, generated_tokens=5_000)


def _mock(statuses: list[int], posted: list[dict[str, Any]], texts_in_order: list[str]) -> httpx.MockTransport:
    texts = iter(texts_in_order)
    answers = iter(statuses)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, text=next(texts))
        posted.append(json.loads(request.content))
        status = next(answers)
        return httpx.Response(status, json={"detail": "nope"} if status >= 400 else {"ok": True})

    return httpx.MockTransport(handler)


def _tgi_collector(
    statuses: list[int], posted: list[dict[str, Any]], texts: list[str] | None = None
) -> InferenceCollector:
    """A collector reading a TGI endpoint (a, b, c by default) and posting to an aggregator answering ``statuses``."""
    texts = texts or [(FIXTURES / "tgi-3.3.6-a.prom").read_text(), _TGI_B, _TGI_C]
    return InferenceCollector(
        url="http://aggregator",
        endpoints=[parse_endpoint("http://tgi:3000/metrics,job_id=t")],
        node="n1",
        clock=ticking(),
        transport=_mock(statuses, posted, texts),
    )


def test_a_failed_post_keeps_the_older_reading_so_the_next_report_covers_the_gap() -> None:
    posted: list[dict[str, Any]] = []
    a = (FIXTURES / "tgi-3.3.6-a.prom").read_text()
    collector = _tgi_collector([503, 200], posted, [a, _TGI_B, _TGI_B])
    collector.collect_once()
    collector.collect_once()  # a -> b posted, answered 503: kept for later
    collector.collect_once()  # a -> b again, now over 20 s
    collector.stop()
    assert [body["interval_seconds"] for body in posted] == [10.0, 20.0]
    assert posted[1]["prefill_tokens"] == 30_000 and posted[1]["prefill_busy_seconds"] == pytest.approx(2.5)
    assert collector.metrics.inference_reports.labels("error")._value.get() == 1


def test_a_rejected_report_is_dropped_and_the_next_interval_starts_fresh() -> None:
    posted: list[dict[str, Any]] = []
    collector = _tgi_collector([422, 200], posted)
    for _ in range(3):
        collector.collect_once()
    collector.stop()
    assert [body["interval_seconds"] for body in posted] == [10.0, 10.0]
    assert (posted[1]["prefill_tokens"], posted[1]["decode_tokens"]) == (8_000, 5_000)  # b -> c only
    assert collector.metrics.inference_reports.labels("rejected")._value.get() == 1


def test_tgi_tokens_of_running_requests_are_reported_when_they_finish_not_as_zero() -> None:
    # TGI counts a request's tokens when it finishes. With 30 requests running and none finished between two
    # scrapes, "0 decode tokens" would be false (the demo's MBU read 0 now and then); the interval waits instead.
    posted: list[dict[str, Any]] = []
    a = (FIXTURES / "tgi-3.3.6-a.prom").read_text()
    collector = _tgi_collector([200, 200], posted, [a, _TGI_B, _TGI_B, _TGI_C])
    for _ in range(4):
        collector.collect_once()
    collector.stop()
    assert [body["interval_seconds"] for body in posted] == [10.0, 20.0]  # b -> b was not reported
    assert (posted[1]["prefill_tokens"], posted[1]["decode_tokens"]) == (8_000, 5_000)


def test_an_idle_tgi_interval_is_reported_as_idle() -> None:
    posted: list[dict[str, Any]] = []
    idle = _TGI_B.replace("\ntgi_batch_current_size 30\n", "\ntgi_batch_current_size 0\n")
    collector = _tgi_collector([200], posted, [idle, idle])
    collector.collect_once()
    collector.collect_once()
    collector.stop()
    assert [(body["interval_seconds"], body["decode_tokens"]) for body in posted] == [(10.0, 0)]


def test_an_unreachable_engine_is_counted_not_fatal() -> None:
    collector = InferenceCollector(
        url="http://aggregator",
        endpoints=[parse_endpoint("http://127.0.0.1:9/metrics,job_id=gone")],
        node="n1",
        scrape_timeout_seconds=0.5,
    )
    assert collector.collect_once() == []
    collector.stop()
    assert collector.metrics.inference_scrapes.labels("error")._value.get() == 1


def test_cli_lists_endpoints_with_a_reading(engine: EngineServer) -> None:
    cmd = [sys.executable, "-m", "mfumon", "exporter", "--inference.list", "--inference.discovery", "off"]
    cmd += ["--inference.url", f"{engine.url},job_id=chat-70b,num_gpus=8"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    (listed,) = json.loads(done.stdout)
    assert listed["job_id"] == "chat-70b" and listed["num_gpus"] == 8
    assert listed["reading"]["engine"] == "vllm" and listed["reading"]["counters"]["generation_tokens"] == 100_000


def test_cli_rejects_a_bad_inference_url() -> None:
    cmd = [sys.executable, "-m", "mfumon", "exporter", "--inference.url", "http://h/metrics,engine=triton"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "engine must be vllm, sglang or tgi" in done.stderr
