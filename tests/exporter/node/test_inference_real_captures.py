"""Real engines' /metrics text (fixtures/inference/real-*, sources in its README) through the real parsing code.

Each capture is one scrape; none of the sources published two scrapes of one server. The intervals below therefore
start from the same process before it served anything (its counters at zero, nothing else changed), so the expected
increase is the capture's own totals, computed by hand from the lines quoted in the comments.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mfumon.exporter.node.inference.engines import EngineReading, parse_engine_metrics
from mfumon.exporter.node.inference.histograms import LatencyHistogram
from mfumon.exporter.node.inference.window import serving_interval

FIXTURES = Path(__file__).parent / "fixtures" / "inference"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def reading(name: str) -> EngineReading:
    return parse_engine_metrics(text(name))


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(value) for value in text.split())


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(value) for value in text.split())


def fresh(real: EngineReading) -> EngineReading:
    """The same process before its first request: every counter at zero, every histogram empty (same edges)."""
    empty = {
        key: LatencyHistogram(histogram.le, (0,) * len(histogram.le), 0, 0.0)
        for key, histogram in real.histograms.items()
    }
    return dataclasses.replace(real, counters=dict.fromkeys(real.counters, 0.0), histograms=empty)


TOKENS_AND_FINISHED = {
    "prompt_tokens",
    "generation_tokens",
    "finished_prompt_tokens",
    "finished_prompt_requests",
    "finished_generation_tokens",
    "finished_generation_requests",
}
# What each capture gives the collector: the standard keys found (counters, gauges).
FOUND = {
    "real-vllm-0.5.0-v0engine-opt125m.prom": (
        TOKENS_AND_FINISHED | {"preemptions"},
        {"requests_running", "requests_waiting", "kv_cache_usage", "kv_tokens_capacity", "kv_tokens_used"},
    ),
    "real-vllm-0.7-v0engine-aibrix-excerpt.prom": (
        {"prompt_tokens", "generation_tokens", "preemptions"},
        {"requests_running", "requests_waiting", "kv_cache_usage", "kv_tokens_capacity", "kv_tokens_used"},
    ),
    "real-vllm-0.28.0-v1engine-qwen27b.prom": (
        TOKENS_AND_FINISHED
        | {"computed_prompt_tokens", "cached_prompt_tokens", "preemptions", "request_running_seconds"}
        | {"engine_flops_per_gpu", "engine_read_bytes_per_gpu", "engine_write_bytes_per_gpu"},
        {"requests_running", "requests_waiting", "kv_cache_usage", "kv_tokens_capacity", "kv_tokens_used"},
    ),
    "real-vllm-0.7-v1engine-prodstack318-excerpt.prom": (
        set(),
        {"requests_running", "requests_waiting", "kv_cache_usage"},
    ),
    "real-vllm-0.10.0-v1engine-prodstack617-excerpt.prom": ({"cached_prompt_tokens"}, {"kv_cache_usage"}),
    "real-sglang-0.4-docs-llama8b.prom": (
        {"prompt_tokens", "generation_tokens", "finished_prompt_tokens", "finished_generation_tokens"},
        {"requests_running", "requests_waiting", "kv_cache_usage", "kv_tokens_used"},
    ),
    "real-sglang-0.3-pr1853-excerpt.prom": ({"prompt_tokens", "finished_prompt_tokens"}, {"kv_tokens_capacity"}),
    "real-sglang-0.4.9-pr7944-excerpt.prom": (
        {"cached_prompt_tokens", "finished_prompt_requests", "finished_generation_requests"},
        {"requests_running", "kv_cache_usage", "kv_tokens_used"},
    ),
    "real-tgi-3.3.5-intel-cpu-openhermes7b.prom": (
        TOKENS_AND_FINISHED | {"decode_steps", "prefill_busy_seconds", "decode_busy_seconds"},
        {"requests_running", "requests_waiting", "kv_tokens_reserved"},
    ),
}


# The latency histograms each capture gives, by report field stem, and the family each was read from.
HISTOGRAMS_FOUND = {
    "real-vllm-0.5.0-v0engine-opt125m.prom": {
        "ttft": "vllm:time_to_first_token_seconds",
        "itl": "vllm:time_per_output_token_seconds",  # per token in V0: inter-token latency, never TPOT
    },
    "real-vllm-0.28.0-v1engine-qwen27b.prom": {
        "ttft": "vllm:time_to_first_token_seconds",
        "tpot": "vllm:request_time_per_output_token_seconds",
        "itl": "vllm:inter_token_latency_seconds",
        "queue": "vllm:request_queue_time_seconds",
    },
    # sglang:time_per_output_token_seconds (observed per streamed chunk) is not read
    "real-sglang-0.4-docs-llama8b.prom": {"ttft": "sglang:time_to_first_token_seconds"},
    "real-tgi-3.3.5-intel-cpu-openhermes7b.prom": {
        "tpot": "tgi_request_mean_time_per_token_duration",
        "queue": "tgi_request_queue_duration",
    },
}


def test_every_real_capture_is_listed() -> None:
    assert {p.name for p in FIXTURES.glob("real-*.prom")} == set(FOUND)


@pytest.mark.parametrize("name", sorted(FOUND))
def test_the_families_the_collector_reads_are_found(name: str) -> None:
    real = reading(name)
    assert real.engine == name.split("-")[1]
    counters, gauges = FOUND[name]
    assert set(real.counters) == counters
    assert set(real.gauges) == gauges
    histograms = HISTOGRAMS_FOUND.get(name, {})
    assert set(real.histograms) == set(histograms)
    assert {key: real.sources[key] for key in real.histograms} == histograms


def test_vllm_0_5_v0_engine() -> None:
    real = reading("real-vllm-0.5.0-v0engine-opt125m.prom")
    assert real.model_name == "facebook/opt-125m"
    assert real.started_at == pytest.approx(1.7181405583e9) and not real.created  # V0: no *_created series
    assert real.gauges["kv_tokens_capacity"] == 7281 * 16  # cache_config_info (no model_name label)
    assert real.kv_cache_dtype == "auto"
    window = serving_interval(fresh(real), real, 10.0)
    assert not window.restarted
    assert (window.prefill_tokens, window.decode_tokens) == (5, 7)  # prompt_tokens_total 5.0, generation 7.0
    assert window.mean_prompt_tokens == 5  # request_prompt_tokens_sum 5.0 / _count 1.0
    assert window.context_tokens == pytest.approx(5 + 7 / 2)  # idle: mean prompt + half the mean output (7 / 1)
    assert window.batch_size is None and window.kv_cache_usage == 0.0  # nothing running at the scrape
    later = parse_engine_metrics(
        text("real-vllm-0.5.0-v0engine-opt125m.prom").replace("1.7181405583e+09", "1.7181406e+09")
    )
    assert serving_interval(real, later, 10.0).restarted  # a new process_start_time_seconds


def test_vllm_0_7_v0_engine_multiprocess_has_no_start_time() -> None:
    # V0 behind its multiprocessing front end: prometheus_client multiprocess mode, so no process_* and no *_created
    # (histogram _sum first); a restart shows only in counters going down.
    real = reading("real-vllm-0.7-v0engine-aibrix-excerpt.prom")
    assert real.model_name == "Qwen/Qwen2.5-Coder-1.5B-Instruct"  # not lora_requests_info's empty label set
    assert real.started_at is None and not real.created
    assert real.gauges["kv_tokens_capacity"] == 81767 * 16
    window = serving_interval(fresh(real), real, 10.0)
    assert (window.prefill_tokens, window.decode_tokens) == (148, 955)
    assert window.mean_prompt_tokens is None and window.context_tokens is None  # request histograms not in excerpt
    restarted = dataclasses.replace(real, counters={"prompt_tokens": 20.0, "generation_tokens": 40.0})
    assert serving_interval(real, restarted, 10.0).restarted


V07_HITS = """\
# HELP vllm:gpu_prefix_cache_hits_total GPU prefix cache hits, in terms of number of cached blocks.
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 10.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 1000.0
"""
CACHE_CONFIG = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="5000"} 1.0
"""


def test_vllm_0_7_v1_engine_counts_prefix_hits_in_blocks() -> None:
    real = reading("real-vllm-0.7-v1engine-prodstack318-excerpt.prom")
    assert real.model_name == "Qwen/Qwen2.5-Coder-32B-Instruct"  # V1 before the engine label
    assert real.started_at == pytest.approx(1.74262400557e9)
    assert real.gauges["kv_cache_usage"] == 0.0  # gpu_cache_usage_perc
    # The excerpt stops at the prefix-cache queries family, whose help says "blocks". Its hits twin, declared as in
    # vLLM's V1 loggers of that release, is appended (with a prompt counter) to check the unit conversion.
    with_hits = parse_engine_metrics(text("real-vllm-0.7-v1engine-prodstack318-excerpt.prom") + V07_HITS + CACHE_CONFIG)
    assert with_hits.counters["cached_prompt_tokens"] == 10 * 16  # 10 blocks of 16 tokens
    assert serving_interval(fresh(with_hits), with_hits, 10.0).prefill_tokens == 1000 - 160
    no_block_size = parse_engine_metrics(text("real-vllm-0.7-v1engine-prodstack318-excerpt.prom") + V07_HITS)
    assert "cached_prompt_tokens" not in no_block_size.counters  # blocks of unknown size: not subtracted as tokens
    assert serving_interval(fresh(no_block_size), no_block_size, 10.0).prefill_tokens == 1000


def test_vllm_0_10_v1_engine_created_series_and_deprecated_twin() -> None:
    # prometheus_client prints each *_created as its own gauge family; the deprecated gpu_ twin counts tokens by now.
    real = reading("real-vllm-0.10.0-v1engine-prodstack617-excerpt.prom")
    assert real.model_name == "zai-org/GLM-4.5" and real.replicas == 1  # engine="0"
    assert real.counters["cached_prompt_tokens"] == 0.0  # "in terms of number of cached tokens": not scaled
    assert real.sources["cached_prompt_tokens"] == "vllm:gpu_prefix_cache_hits_total"
    assert real.created["cached_prompt_tokens"] == pytest.approx(1.7537953269353123e9)
    assert real.gauges["kv_cache_usage"] == pytest.approx(9.75010481363281e-06)
    restarted = parse_engine_metrics(
        text("real-vllm-0.10.0-v1engine-prodstack617-excerpt.prom").replace(
            "1.7537953269353123e+09", "1.7537960000000000e+09"
        )
    )
    assert serving_interval(real, restarted, 10.0).restarted  # only *_created tells: the counter still reads 0


def test_sglang_0_4_docs_capture() -> None:
    # Multiprocess output (_sum first, no _created); func_latency_seconds{name="generate_request"} is no model name.
    real = reading("real-sglang-0.4-docs-llama8b.prom")
    assert real.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert real.started_at is None and not real.created
    window = serving_interval(fresh(real), real, 10.0)
    assert window.prefill_tokens == 8_128_902  # prompt_tokens_total 8.128902e+06, no cached_tokens_total yet
    assert window.decode_tokens == 7_557_572  # generation_tokens_total 7.557572e+06
    assert window.batch_size == 162  # num_running_reqs
    assert window.context_tokens == pytest.approx(123_859 / 162)  # num_used_tokens / running: 764.5 tokens
    assert (window.requests_waiting, window.kv_cache_usage) == (2826, 0.28)
    assert window.mean_prompt_tokens is None  # no num_requests_total in this version


def test_sglang_0_3_names_the_model_in_a_name_label() -> None:
    real = reading("real-sglang-0.3-pr1853-excerpt.prom")
    assert (
        real.model_name == "/shared/public/elr-models/meta-llama/Llama-3.2-3B/5cc0ffe09ee49f7be6ca7c794ee6bd7245e84e60/"
    )
    assert real.gauges["kv_tokens_capacity"] == 570_979  # max_total_num_tokens
    assert serving_interval(fresh(real), real, 10.0).prefill_tokens == 230_794


def test_sglang_tokenizer_counters_carry_no_engine_labels() -> None:
    # The tokenizer's counters have model_name only, the scheduler's gauges engine_type too: read side by side.
    real = reading("real-sglang-0.4.9-pr7944-excerpt.prom")
    assert real.counters["cached_prompt_tokens"] == 2688 and real.counters["finished_prompt_requests"] == 217
    assert (real.gauges["requests_running"], real.gauges["kv_tokens_used"]) == (0, 0)


def test_tgi_3_3_5_capture() -> None:
    real = reading("real-tgi-3.3.5-intel-cpu-openhermes7b.prom")
    assert real.model_name is None and real.started_at is None  # TGI labels no model, exports no process metrics
    # tgi_batch_max_total_tokens is not printed by TGI 3.3 (set before the recorder is installed): no KV usage.
    assert "kv_tokens_capacity" not in real.gauges and "kv_cache_usage" not in real.gauges
    # A TGI that has served nothing prints no counter series; its first busy scrape counts from zero.
    idle = parse_engine_metrics("", engine="tgi")
    window = serving_interval(idle, real, 10.0)
    assert not window.restarted
    assert (window.prefill_tokens, window.decode_tokens) == (662, 3423)  # input_length_sum, generated_tokens_sum
    # 1509 decode calls made 3423 - 109 tokens (each request's first token came out of its prefill)
    assert window.batch_size == pytest.approx((3423 - 109) / 1509)
    assert window.prefill_busy_seconds == pytest.approx(1.246376687)  # forward_duration_sum{method="prefill"}
    assert window.decode_busy_seconds == pytest.approx(89.03133092599998)
    assert window.mean_prompt_tokens == pytest.approx(662 / 109)
    assert window.context_tokens == pytest.approx(662 / 109 + 3423 / 109 / 2)  # idle: prompt + half the output
    assert window.kv_cache_usage is None
    assert (window.requests_running, window.requests_waiting) == (0, 0)


def test_vllm_0_28_v1_engine_latency_histograms_preemptions_and_running_time() -> None:
    # vLLM 0.28.0 (image vllm/vllm-openai:v0.28.0), 13.74 h of production traffic; the expected values are the
    # capture's own lines, the interval starting from the same process before its first request.
    real = reading("real-vllm-0.28.0-v1engine-qwen27b.prom")
    assert real.model_name == "Qwen3.8-27B-NVFP4" and real.replicas == 1
    window = serving_interval(fresh(real), real, 10.0)
    assert not window.restarted and window.engine == "vllm"
    assert window.requests_finished == 1578  # request_generation_tokens_count 1578.0
    assert window.preemptions == 197  # num_preemptions_total 197.0
    assert window.request_running_seconds == pytest.approx(40373.13127643257)  # request_inference_time_seconds_sum
    ttft = window.ttft_histogram
    assert ttft is not None
    # vLLM V1's TTFT edges (loggers.py) and the cumulative count printed at each
    assert ttft.le == floats(
        "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10 20 40 80 160 640 2560"
    )
    assert ttft.counts == ints("0 0 0 0 0 0 0 2 206 822 1100 1176 1303 1371 1410 1443 1502 1559 1576 1579 1579 1579")
    # one more than the finished requests: one request had its first token and was still running at the scrape
    assert (ttft.count, ttft.sum) == (1579, pytest.approx(5210.326116800308))
    tpot = window.tpot_histogram  # request_time_per_output_token_seconds: one per finished request
    assert tpot is not None
    assert tpot.counts[:9] == (0, 1475, 1550, 1563, 1570, 1576, 1576, 1576, 1578)
    assert (tpot.count, tpot.sum) == (1578, pytest.approx(30.84767843015596))
    itl = window.itl_histogram  # inter_token_latency_seconds: one per token after each request's first
    assert itl is not None
    assert itl.counts[:6] == (85, 2_005_412, 2_005_583, 2_005_722, 2_006_019, 2_006_558)
    assert (itl.count, itl.sum) == (2_012_574, pytest.approx(37674.817305039716))
    assert itl.count == 2_014_153 - 1_579  # generation_tokens_total - the first tokens (TTFT's count)
    queue = window.queue_histogram
    assert queue is not None
    assert queue.le[:8] == (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0)
    assert (
        queue.counts == ints("1469 1470 1474 1474 1474 1476 1476 1483 1494 1518 1542 1560 1568 1571 1573") + (1578,) * 6
    )
    assert (queue.count, queue.sum) == (1578, pytest.approx(2214.2590095009946))
    fields = window.report_fields()
    assert fields["engine"] == "vllm" and fields["preemptions"] == 197 and fields["requests_finished"] == 1578
    assert fields["tpot_histogram"]["count"] == 1578 and fields["itl_histogram"]["count"] == 2_012_574


def test_vllm_0_5_v0_engine_has_per_token_latency_only() -> None:
    # V0 0.5's time_per_output_token_seconds is observed once per decode step of each request: 6 for one request
    # that made 7 tokens. That is inter-token latency; a per-request TPOT histogram did not exist yet.
    real = reading("real-vllm-0.5.0-v0engine-opt125m.prom")
    window = serving_interval(fresh(real), real, 10.0)
    assert window.tpot_histogram is None and window.queue_histogram is None
    assert window.request_running_seconds is None and window.preemptions == 0
    itl = window.itl_histogram
    assert itl is not None and (itl.count, itl.sum) == (6, pytest.approx(0.19016313552856445))
    assert itl.le[:3] == (0.01, 0.025, 0.05) and itl.counts[:3] == (0, 0, 6)
    ttft = window.ttft_histogram
    assert ttft is not None and (ttft.count, ttft.sum) == (1, pytest.approx(0.31326723098754883))
    assert ttft.counts[8:10] == (0, 1)  # le 0.25: 0, le 0.5: 1
    assert "tpot_histogram" not in window.report_fields()


def test_sglang_0_4_docs_capture_sends_ttft_only() -> None:
    real = reading("real-sglang-0.4-docs-llama8b.prom")
    window = serving_interval(fresh(real), real, 10.0)
    ttft = window.ttft_histogram
    assert ttft is not None
    assert ttft.le[-3:] == (20.0, 25.0, 30.0)  # 0.3-0.4.0 edges
    assert ttft.counts[-6:] == (941, 1330, 1970, 2326, 2417, 2513)
    assert (ttft.count, ttft.sum) == (11_008, pytest.approx(2.3518979474117756e6))
    # time_per_output_token_seconds: 7,400,757 observations (per streamed chunk) for ~11,008 requests: neither
    assert window.tpot_histogram is None and window.itl_histogram is None
    assert window.queue_histogram is None and window.preemptions is None


def test_tgi_3_3_5_capture_has_no_time_to_first_token() -> None:
    real = reading("real-tgi-3.3.5-intel-cpu-openhermes7b.prom")
    window = serving_interval(parse_engine_metrics("", engine="tgi"), real, 10.0)
    assert window.engine == "tgi" and window.requests_finished == 109
    assert window.ttft_histogram is None and window.itl_histogram is None  # TGI records neither
    assert window.preemptions is None and window.request_running_seconds is None
    tpot = window.tpot_histogram  # tgi_request_mean_time_per_token_duration: one per finished request
    assert tpot is not None and len(tpot.le) == 35
    assert tpot.le[15:17] == (0.0656840835571289, 0.09852612533569335)
    assert tpot.counts[14:17] == (0, 9, 109)
    assert (tpot.count, tpot.sum) == (109, pytest.approx(8.643160945))
    queue = window.queue_histogram
    assert queue is not None
    assert queue.counts == (9,) * 15 + (17,) + (29,) * 8 + (55, 81, 107, 108) + (109,) * 7
    assert (queue.count, queue.sum) == (109, pytest.approx(295.275961956))
    assert "ttft_histogram" not in window.report_fields()
