"""Latency histograms, preemptions and running time: engine /metrics -> readings -> the report's interval fields.

The rendered fixtures (fixtures/inference, README) carry names, help texts and edges from each engine's source and
invented values; every expected number below is worked out by hand from the lines quoted beside it. The real captures
are tested in test_inference_real_captures.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from mfumon.exporter.node.inference.collector import InferenceCollector
from mfumon.exporter.node.inference.endpoints import parse_endpoint
from mfumon.exporter.node.inference.engines import EngineReading, parse_engine_metrics
from mfumon.exporter.node.inference.histograms import MAX_EDGES, LatencyHistogram
from mfumon.exporter.node.inference.window import restarted_between, serving_interval

FIXTURES = Path(__file__).parent / "fixtures" / "inference"


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(value) for value in text.split())


#: SGLang 0.4.5-0.5.23's TTFT edges and its inter-token edges (also the per-request TPOT's from 0.5.22)
SGLANG_TTFT = floats("0.1 0.2 0.4 0.6 0.8 1 2 4 6 8 10 20 40 60 80 100 200 400")
SGLANG_ITL = floats(
    "0.002 0.004 0.006 0.008 0.01 0.015 0.02 0.025 0.03 0.035 0.04 0.06 0.08 0.1 0.2 0.4 0.6 0.8 1 2 4 6 8"
)


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def reading(name: str) -> EngineReading:
    return parse_engine_metrics(text(name))


def cumulative(edges: tuple[float, ...], at: dict[float, int]) -> tuple[int, ...]:
    """The cumulative counts at ``edges`` of observations counted ``at`` each edge (the bucket they fall in)."""
    running, counts = 0, []
    for edge in edges:
        running += at.get(edge, 0)
        counts.append(running)
    return tuple(counts)


def present(histogram: LatencyHistogram | None) -> LatencyHistogram:
    assert histogram is not None
    return histogram


# -- the record ----------------------------------------------------------------------------------------------------


def test_edges_the_wire_cannot_carry_are_dropped_without_losing_an_observation() -> None:
    # SGLang's queue time starts at le="0.0"; the wire takes edges in (0, 1e7].
    one = present(LatencyHistogram.from_buckets({0.0: 3, 0.5: 5, 1.0: 7, 2e7: 8, float("inf"): 9}, 4.0))
    assert (one.le, one.counts, one.count, one.sum) == ((0.5, 1.0), (5, 7), 9, 4.0)
    assert LatencyHistogram.from_buckets({0.5: 1}, 0.1) is None  # no +Inf bucket and no _count
    assert LatencyHistogram.from_buckets({0.5: 1}, 0.1, count=2) == LatencyHistogram((0.5,), (1,), 2, 0.1)
    assert LatencyHistogram.from_buckets({0.5: 3, 1.0: 2, float("inf"): 3}, 1.0) is None  # counts that fall


def test_a_long_edge_list_is_thinned_keeping_the_largest_edge() -> None:
    buckets: dict[float, float] = {float(edge): edge for edge in range(1, 101)}  # 100 edges, one observation each
    buckets[float("inf")] = 100
    thin = present(LatencyHistogram.from_buckets(buckets, 5050.0))
    assert len(thin.le) <= MAX_EDGES and thin.le[-1] == 100.0
    assert thin.le[:3] == (2.0, 4.0, 6.0)  # every second edge, counted back from the last
    assert all(count == edge for edge, count in zip(thin.le, thin.counts, strict=True))  # cumulative counts unchanged
    assert thin.count == 100


def test_increase_add_and_wire_form() -> None:
    before = LatencyHistogram((0.1, 1.0), (2, 5), 6, 3.0)
    after = LatencyHistogram((0.1, 1.0), (4, 9), 11, 5.5)
    assert after.increase(before, restarted=False) == LatencyHistogram((0.1, 1.0), (2, 4), 5, 2.5)
    assert after.increase(before, restarted=True) is after  # all of it since the restart
    assert after.increase(None, restarted=False) is after  # first printed now: all of it happened since
    assert after.increase(LatencyHistogram((0.2, 1.0), (2, 5), 6, 3.0), restarted=False) is None  # edges changed
    assert before.increase(after, restarted=False) is None  # fell without a restart seen: left out, not sent wrong
    assert after.increase(after, restarted=False) == LatencyHistogram((0.1, 1.0), (0, 0), 0, 0.0)
    assert before.add(after) == LatencyHistogram((0.1, 1.0), (6, 14), 17, 8.5)
    assert before.add(LatencyHistogram((0.1,), (1,), 1, 0.05)) is None  # replicas with other edges do not add
    wire = {"le": [0.1, 1.0], "counts": [2, 4], "count": 5, "sum": 2.5}
    assert LatencyHistogram((0.1, 1.0), (2, 4), 5, 2.5).as_json() == wire


# -- vLLM ----------------------------------------------------------------------------------------------------------

V1_TTFT = floats("0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10 20 40 80 160 640 2560")
V1_QUEUE = floats("0.3 0.5 0.8 1 1.5 2 2.5 5 10 15 20 30 40 50 60 120 240 480 960 1920 7680")


def test_vllm_interval_histograms_preemptions_and_running_time() -> None:
    # vLLM 0.9 (V1) a -> b: 20 requests finished (request_generation_tokens_count 200 -> 220), each with its first
    # token within 0.5 s (bucket le="0.5" 200 -> 220, sum 70.0 -> 77.0), one per-token interval within 0.025 s
    # (time_per_output_token_seconds 200 -> 220, sum 3.2 -> 3.52) and a queue wait within 0.5 s (sum 80 -> 88);
    # num_preemptions_total 0 -> 3, request_inference_time_seconds_sum 1700 -> 1870.
    window = serving_interval(reading("vllm-v0.9-v1engine-a.prom"), reading("vllm-v0.9-v1engine-b.prom"), 10.0)
    assert not window.restarted
    assert (window.engine, window.requests_finished, window.preemptions) == ("vllm", 20, 3)
    assert window.request_running_seconds == pytest.approx(170.0)
    ttft = present(window.ttft_histogram)
    assert ttft.le == V1_TTFT and ttft.counts == cumulative(V1_TTFT, {0.5: 20})
    assert (ttft.count, ttft.sum) == (20, pytest.approx(7.0))
    # 0.9 has no per-request TPOT; its time_per_output_token_seconds is per token: inter-token latency
    assert window.tpot_histogram is None
    itl = present(window.itl_histogram)
    assert itl.counts[:2] == (0, 20) and (itl.count, itl.sum) == (20, pytest.approx(0.32))
    queue = present(window.queue_histogram)
    assert queue.le == V1_QUEUE and queue.counts == cumulative(V1_QUEUE, {0.5: 20})
    assert (queue.count, queue.sum) == (20, pytest.approx(8.0))
    fields = window.report_fields()
    assert {"engine", "requests_finished", "preemptions", "request_running_seconds"} <= set(fields)
    assert {"ttft_histogram", "itl_histogram", "queue_histogram"} <= set(fields) and "tpot_histogram" not in fields
    assert fields["ttft_histogram"]["counts"][9] == 20 and fields["ttft_histogram"]["count"] == 20


def test_vllm_restart_counts_the_histograms_from_zero() -> None:
    # b -> restart: the new process has served one request (TTFT 0.35 s, queue 0.4 s, 8.5 s running).
    window = serving_interval(reading("vllm-v0.9-v1engine-b.prom"), reading("vllm-v0.9-v1engine-restart.prom"), 10.0)
    assert window.restarted
    ttft = present(window.ttft_histogram)
    assert ttft.counts == cumulative(V1_TTFT, {0.5: 1}) and (ttft.count, ttft.sum) == (1, pytest.approx(0.35))
    queue = present(window.queue_histogram)
    assert (queue.count, queue.sum) == (1, pytest.approx(0.4))
    assert window.preemptions == 0 and window.request_running_seconds == pytest.approx(8.5)


def test_vllm_data_parallel_histograms_add_up_bucket_by_bucket() -> None:
    # dp2: engine 0 had 20 first tokens within 0.5 s (sum 7.0); engine 1 had 4 within 0.25 s and 20 more within 0.5 s
    # (sum 7.8). Preemptions 2 + 1, running time 170 + 170.
    dp = reading("vllm-v0.9-v1engine-dp2.prom")
    ttft = present(dp.histograms["ttft"])
    assert ttft.counts == cumulative(V1_TTFT, {0.25: 4, 0.5: 40})
    assert (ttft.count, ttft.sum) == (44, pytest.approx(14.8))
    assert dp.histograms["queue"].count == 40
    assert dp.counters["preemptions"] == 3 and dp.counters["request_running_seconds"] == 340


def test_vllm_v0_engine_per_token_histogram_is_inter_token_latency() -> None:
    # V0 0.4 a -> b: 4 more first tokens within 0.08 s (sum 3.2 -> 3.52), 4 more per-token intervals within 0.025 s
    # (time_per_output_token_seconds sum 0.84 -> 0.924). V0 prints no per-request TPOT and no queue time.
    window = serving_interval(reading("vllm-v0.4-v0engine-a.prom"), reading("vllm-v0.4-v0engine-b.prom"), 10.0)
    ttft = present(window.ttft_histogram)
    assert ttft.counts[5:7] == (0, 4) and (ttft.count, ttft.sum) == (4, pytest.approx(0.32))
    itl = present(window.itl_histogram)
    assert itl.counts[:2] == (0, 4) and (itl.count, itl.sum) == (4, pytest.approx(0.084))
    assert window.tpot_histogram is None and window.queue_histogram is None
    assert window.preemptions == 0 and window.request_running_seconds is None


def test_changed_edges_give_no_histogram_for_the_interval() -> None:
    # The engine came back with another TTFT edge: buckets of other edges cannot be subtracted.
    moved = text("vllm-v0.9-v1engine-b.prom").replace(
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.25"',
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.3"',
    )
    window = serving_interval(reading("vllm-v0.9-v1engine-a.prom"), parse_engine_metrics(moved), 10.0)
    assert not window.restarted
    assert window.ttft_histogram is None and "ttft_histogram" not in window.report_fields()
    assert present(window.queue_histogram).count == 20  # the others still go


def test_a_histogram_read_from_another_family_gives_no_increase() -> None:
    # An engine upgraded in place would print inter_token_latency_seconds where it printed time_per_output_token:
    # the same observations under a new name, but the two series did not count together, so no increase.
    renamed = text("vllm-v0.9-v1engine-b.prom").replace(
        "vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"
    )
    a, b = reading("vllm-v0.9-v1engine-a.prom"), parse_engine_metrics(renamed)
    assert (a.sources["itl"], b.sources["itl"]) == (
        "vllm:time_per_output_token_seconds",
        "vllm:inter_token_latency_seconds",
    )
    window = serving_interval(a, b, 10.0)
    assert not window.restarted and window.itl_histogram is None
    assert present(window.ttft_histogram).count == 20


def test_a_histogram_whose_count_fell_means_a_restart() -> None:
    # Cumulative histograms never shrink in one process: fewer observations than before is a new process, even
    # where every counter read the same.
    b = reading("vllm-v0.9-v1engine-b.prom")
    smaller = dataclasses.replace(
        b, histograms={**b.histograms, "ttft": reading("vllm-v0.9-v1engine-restart.prom").histograms["ttft"]}
    )
    assert restarted_between(b, smaller)
    assert not restarted_between(b, b)


# -- SGLang --------------------------------------------------------------------------------------------------------

#: SGLang 0.5.16-0.5.23's queue edges without the 0.0 the wire cannot carry
SGLANG_QUEUE = floats(
    "0.001 0.005 0.01 0.05 0.1 0.2 0.5 1 2 3 4 5 10 15 20 30 40 50 60 70 80 90 100"
    " 200 300 400 500 600 700 800 900 1000 1200 1400 1600 1800 2000 2500 3000"
)


def test_sglang_interval_histograms_and_retractions() -> None:
    # SGLang 0.5.23 a -> b: 20 requests finished, 15 streamed (num_requests_total{is_streaming} 150 -> 165, 50 -> 55).
    # TTFT: streamed +10 at 0.3 s and +5 at 0.5 s, the others +5 at 0.7 s (sum 9.0), summed over is_streaming.
    # Per-request TPOT: +10 at 0.019, +5 at 0.024 (not streamed), +5 at 0.033 (sum 0.475).
    # Inter-token latency, one per token: +9,000 at 0.018, +2,980 at 0.033 (sum 260.34).
    # Queue: +16 that never waited (le="0.0", counted at the first edge kept, 0.001) and +4 at 1.5 s (sum 6.0).
    # num_retracted_requests_total 5 -> 8; the num_retracted_reqs gauge (1 -> 0) is no count.
    window = serving_interval(reading("sglang-0.5.23-a.prom"), reading("sglang-0.5.23-b.prom"), 10.0)
    assert not window.restarted
    assert (window.engine, window.requests_finished, window.preemptions) == ("sglang", 20, 3)
    assert window.request_running_seconds is None  # SGLang exports no running time per request
    ttft = present(window.ttft_histogram)
    assert ttft.le == SGLANG_TTFT and ttft.counts == cumulative(SGLANG_TTFT, {0.4: 10, 0.6: 5, 0.8: 5})
    assert (ttft.count, ttft.sum) == (20, pytest.approx(9.0))
    tpot = present(window.tpot_histogram)
    assert tpot.le == SGLANG_ITL and tpot.counts == cumulative(SGLANG_ITL, {0.02: 10, 0.025: 5, 0.035: 5})
    assert (tpot.count, tpot.sum) == (20, pytest.approx(0.475))
    itl = present(window.itl_histogram)
    assert itl.counts == cumulative(SGLANG_ITL, {0.02: 9_000, 0.035: 2_980})
    assert (itl.count, itl.sum) == (11_980, pytest.approx(260.34))
    queue = present(window.queue_histogram)
    assert queue.le == SGLANG_QUEUE and queue.counts == cumulative(SGLANG_QUEUE, {0.001: 16, 2.0: 4})
    assert (queue.count, queue.sum) == (20, pytest.approx(6.0))


def test_sglang_restart_counts_the_histograms_from_zero() -> None:
    # Multiprocess mode prints no start time and no _created: the counters going down tell. The new process: two
    # first tokens at 0.3 s, one finished request (TPOT 0.019), 398 tokens at 0.018 s, two queue waits of 0.
    window = serving_interval(reading("sglang-0.5.23-b.prom"), reading("sglang-0.5.23-restart.prom"), 10.0)
    assert window.restarted
    assert (present(window.ttft_histogram).count, present(window.ttft_histogram).sum) == (2, pytest.approx(0.6))
    assert present(window.tpot_histogram).counts == cumulative(SGLANG_ITL, {0.02: 1})
    assert present(window.itl_histogram).count == 398
    assert present(window.queue_histogram).counts == (2,) * len(SGLANG_QUEUE)
    assert window.preemptions == 0


def test_sglang_replicas_add_up_and_tensor_parallel_ranks_count_once() -> None:
    # dp2: two data-parallel replicas, each of two TP ranks printing the same scheduler series. Queue: replica 0
    # 10 waits of 0, replica 1 4 of 0 and 2 of 1.5 s -> 16 (not 32); retractions 2 + 1 -> 3 (not 6). The tokenizer's
    # histograms carry no dp_rank: 30 first tokens.
    dp = reading("sglang-0.5.23-dp2.prom")
    assert dp.replicas == 2
    queue = present(dp.histograms["queue"])
    assert queue.counts == cumulative(SGLANG_QUEUE, {0.001: 14, 2.0: 2}) and (queue.count, queue.sum) == (16, 3.0)
    assert dp.counters["preemptions"] == 3
    assert dp.histograms["ttft"].count == 30 and dp.histograms["itl"].count == 1_000


def test_sglang_changed_edges_give_no_histogram() -> None:
    # Restarted with --bucket-time-to-first-token: other edges (one moved from 0.4 to 0.5) and no restart seen.
    moved = "\n".join(
        line.replace('le="0.4"', 'le="0.5"') if line.startswith("sglang:time_to_first_token_seconds_bucket") else line
        for line in text("sglang-0.5.23-b.prom").splitlines()
    )
    window = serving_interval(reading("sglang-0.5.23-a.prom"), parse_engine_metrics(moved), 10.0)
    assert window.ttft_histogram is None
    assert present(window.itl_histogram).count == 11_980


# -- TGI -----------------------------------------------------------------------------------------------------------

#: TGI 3.3.6's 35 duration edges, 0.0001 x 1.5^k for k = 1..35 (router/src/server.rs)
TGI_EDGES = tuple(0.0001 * 1.5**k for k in range(1, 36))


def test_tgi_interval_per_request_histograms_and_no_time_to_first_token() -> None:
    # TGI 3.3.6 a -> b: 20 requests finished (tgi_request_generated_tokens_count 196 -> 216). Queue: 15 more within
    # 0.0657 s (edge 16) and 5 within 0.499 s (edge 21), sum 14.5 -> 17.25. Mean time per token: 14 more within
    # 0.0292 s (edge 14), 6 within 0.0438 s (edge 15), sum 5.1 -> 5.69. TGI has no TTFT, no inter-token latency, no
    # preemption counter and no replicas of its own to add up.
    a, b = reading("tgi-3.3.6-a.prom"), reading("tgi-3.3.6-b.prom")
    assert present(a.histograms["queue"]).le == pytest.approx(TGI_EDGES)
    window = serving_interval(a, b, 10.0)
    assert not window.restarted and (window.engine, window.requests_finished) == ("tgi", 20)
    queue = present(window.queue_histogram)
    assert queue.counts == (0,) * 15 + (15,) * 5 + (20,) * 15 and (queue.count, queue.sum) == (20, pytest.approx(2.75))
    tpot = present(window.tpot_histogram)
    assert tpot.counts == (0,) * 13 + (14,) + (20,) * 21 and (tpot.count, tpot.sum) == (20, pytest.approx(0.59))
    assert window.ttft_histogram is None and window.itl_histogram is None
    assert window.preemptions is None and window.request_running_seconds is None
    fields = window.report_fields()
    assert not {"ttft_histogram", "itl_histogram", "preemptions", "request_running_seconds"} & set(fields)


def test_tgi_restart_and_changed_edges() -> None:
    b = reading("tgi-3.3.6-b.prom")
    restart = serving_interval(b, reading("tgi-3.3.6-restart.prom"), 10.0)
    assert restart.restarted
    assert (present(restart.queue_histogram).count, present(restart.queue_histogram).sum) == (1, pytest.approx(0.04))
    assert (present(restart.tpot_histogram).count, present(restart.tpot_histogram).sum) == (1, pytest.approx(0.021))
    moved = text("tgi-3.3.6-b.prom").replace(
        'tgi_request_queue_duration_bucket{le="0.0003375"}', 'tgi_request_queue_duration_bucket{le="0.0004"}'
    )
    window = serving_interval(reading("tgi-3.3.6-a.prom"), parse_engine_metrics(moved), 10.0)
    assert window.queue_histogram is None and present(window.tpot_histogram).count == 20


# -- the report ----------------------------------------------------------------------------------------------------


def _posted_reports(files: list[str]) -> list[dict[str, Any]]:
    """What the collector posts for an endpoint serving ``files`` in turn, 10 s apart."""
    texts = iter([text(name) for name in files])
    posted: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, text=next(texts))
        posted.append(json.loads(request.content))
        return httpx.Response(200, json={"ok": True})

    times = iter(range(0, 1_000, 10))
    collector = InferenceCollector(
        url="http://aggregator",
        endpoints=[parse_endpoint("http://engine:8000/metrics,job_id=chat")],
        node="n1",
        clock=lambda: float(next(times)),
        transport=httpx.MockTransport(handler),
    )
    for _ in files:
        collector.collect_once()
    collector.stop()
    return posted


def test_the_posted_report_carries_engine_counts_and_histograms() -> None:
    (report,) = _posted_reports(["sglang-0.5.23-a.prom", "sglang-0.5.23-b.prom"])
    assert (report["engine"], report["requests_finished"], report["preemptions"]) == ("sglang", 20, 3)
    assert report["ttft_histogram"] == {
        "le": list(SGLANG_TTFT),
        "counts": list(cumulative(SGLANG_TTFT, {0.4: 10, 0.6: 5, 0.8: 5})),
        "count": 20,
        "sum": pytest.approx(9.0),
    }
    assert report["tpot_histogram"]["count"] == 20 and report["itl_histogram"]["count"] == 11_980
    assert report["queue_histogram"]["le"][0] == 0.001 and report["queue_histogram"]["counts"][0] == 16
    assert "request_running_seconds" not in report
    (vllm,) = _posted_reports(["vllm-v0.9-v1engine-a.prom", "vllm-v0.9-v1engine-b.prom"])
    assert vllm["engine"] == "vllm" and vllm["request_running_seconds"] == pytest.approx(170.0)
    assert "tpot_histogram" not in vllm and vllm["itl_histogram"]["count"] == 20
