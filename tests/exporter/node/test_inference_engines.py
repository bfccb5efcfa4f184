"""Serving engines' /metrics text (fixtures/inference, see its README) -> readings -> what happened in an interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from mfumon.exporter.node.inference.engines import detect_engine, parse_engine_metrics
from mfumon.exporter.node.inference.window import serving_interval

FIXTURES = Path(__file__).parent / "fixtures" / "inference"


def reading(name: str):  # type: ignore[no-untyped-def]
    return parse_engine_metrics((FIXTURES / name).read_text())


def test_vllm_v1_engine_counters_gauges_and_cache_config() -> None:
    a = reading("vllm-v0.9-v1engine-a.prom")
    assert a.engine == "vllm"
    assert a.model_name == "meta-llama/Llama-3.1-70B-Instruct"
    assert a.counters["prompt_tokens"] == 300_000
    assert a.counters["cached_prompt_tokens"] == 60_000  # vllm:prefix_cache_hits_total, not the deprecated twin too
    assert a.counters["generation_tokens"] == 100_000
    assert a.gauges["requests_running"] == 32 and a.gauges["requests_waiting"] == 3
    assert a.gauges["kv_cache_usage"] == 0.41
    assert a.gauges["kv_tokens_capacity"] == 160_000  # num_gpu_blocks 10000 x block_size 16
    assert a.kv_cache_dtype == "auto"
    assert a.created["prompt_tokens"] == pytest.approx(1748000000.5)


def test_vllm_v1_interval_by_hand() -> None:
    # a -> b, 10 s: prompt +40,000 of which 8,000 prefix-cache hits -> 32,000 computed; generation +20,000;
    # batch = running 32; context = 0.41 x 160,000 KV tokens / 32 running = 2,050;
    # finished requests +20 with 30,000 prompt tokens -> mean prompt 1,500.
    window = serving_interval(reading("vllm-v0.9-v1engine-a.prom"), reading("vllm-v0.9-v1engine-b.prom"), 10.0)
    assert not window.restarted
    assert window.prefill_tokens == 32_000
    assert window.decode_tokens == 20_000
    assert window.batch_size == 32
    assert window.context_tokens == pytest.approx(2_050)
    assert window.mean_prompt_tokens == pytest.approx(1_500)
    assert window.requests_waiting == 3 and window.kv_cache_usage == 0.41
    fields = window.report_fields()
    assert fields["interval_seconds"] == 10.0 and "prefill_busy_seconds" not in fields


def test_vllm_restart_mid_run_counts_the_new_counters_from_zero() -> None:
    # b -> restart: every counter fell (340,000 -> 1,200 prompt) and the _created timestamps moved.
    window = serving_interval(reading("vllm-v0.9-v1engine-b.prom"), reading("vllm-v0.9-v1engine-restart.prom"), 10.0)
    assert window.restarted
    assert window.prefill_tokens == 1_000  # 1,200 prompt - 200 cached since the restart
    assert window.decode_tokens == 350
    assert window.requests_running == 2


def test_a_restart_hidden_by_larger_counters_is_caught_by_created() -> None:
    # The new process already counted more (400,000 > 340,000): only vllm:*_created tells it restarted.
    window = serving_interval(
        reading("vllm-v0.9-v1engine-b.prom"), reading("vllm-v0.9-v1engine-restart-busy.prom"), 10.0
    )
    assert window.restarted
    assert window.decode_tokens == 150_000  # its whole count, not 150,000 - 120,000


def test_vllm_data_parallel_engines_add_up() -> None:
    dp = reading("vllm-v0.9-v1engine-dp2.prom")
    assert dp.replicas == 2
    assert dp.gauges["requests_running"] == 40  # 24 + 16
    assert dp.counters["generation_tokens"] == 84_000  # 40,000 + 44,000
    assert dp.gauges["kv_cache_usage"] == pytest.approx(0.25)  # mean of 0.30 and 0.20
    assert dp.gauges["kv_tokens_capacity"] == 320_000  # two engines' caches
    window = serving_interval(dp, dp, 10.0)
    assert window.batch_size == 20  # 40 running over 2 replicas: each decode step batches 20


def test_vllm_v0_engine() -> None:
    # V0 (model_name only, gpu_cache_usage_perc, no _created: restarts show in process_start_time_seconds).
    a, b = reading("vllm-v0.4-v0engine-a.prom"), reading("vllm-v0.4-v0engine-b.prom")
    assert a.started_at == pytest.approx(1717430000.25) and not a.created
    window = serving_interval(a, b, 10.0)
    assert (window.prefill_tokens, window.decode_tokens) == (5_000, 2_400)
    assert window.batch_size == 8
    assert window.context_tokens == pytest.approx(0.2 * 2_000 * 16 / 8)  # 800
    assert window.mean_prompt_tokens == pytest.approx(5_000 / 4)  # 4 finished requests, 5,000 prompt tokens
    restart = serving_interval(b, reading("vllm-v0.4-v0engine-restart.prom"), 10.0)
    assert restart.restarted and (restart.prefill_tokens, restart.decode_tokens) == (1_800, 320)


def test_sglang_realtime_tokens_and_decode_sequence_lengths() -> None:
    a, b = reading("sglang-0.5-a.prom"), reading("sglang-0.5-b.prom")
    assert a.engine == "sglang" and a.model_name == "Qwen/Qwen2.5-32B-Instruct"
    window = serving_interval(a, b, 10.0)
    assert window.prefill_tokens == 24_000  # realtime_tokens_total{mode="prefill_compute"}
    assert window.decode_tokens == 12_000  # realtime_tokens_total{mode="decode"}
    assert window.batch_size == 48
    assert window.context_tokens == pytest.approx(96_300 / 48)  # decode_sum_seq_lens / running
    assert window.mean_prompt_tokens == pytest.approx(28_000 / 20)  # prompt_tokens_total / num_requests_total
    assert window.kv_cache_usage == 0.62
    restart = serving_interval(b, reading("sglang-0.5-restart.prom"), 10.0)
    assert restart.restarted and (restart.prefill_tokens, restart.decode_tokens) == (3_000, 400)


def test_older_sglang_without_realtime_counters() -> None:
    window = serving_interval(reading("sglang-0.4-a.prom"), reading("sglang-0.4-b.prom"), 10.0)
    assert window.prefill_tokens == 24_000  # prompt +30,000 - cached +6,000
    assert window.decode_tokens == 12_000  # generation_tokens_total
    assert window.requests_waiting == 5
    assert window.context_tokens is not None


def test_tgi_decode_steps_busy_time_and_token_budget() -> None:
    a, b = reading("tgi-3.3.6-a.prom"), reading("tgi-3.3.6-b.prom")
    assert a.engine == "tgi" and a.model_name is None
    assert a.gauges["kv_cache_usage"] == pytest.approx(61_440 / 122_880)  # current max tokens / batch max total
    window = serving_interval(a, b, 10.0)
    assert window.prefill_tokens == 30_000  # tgi_request_input_length_sum
    assert window.decode_tokens == 12_000  # tgi_request_generated_tokens_sum
    # 20 requests finished (30,000 prompt tokens / 1,500): their first tokens came out of prefill, not decode calls
    assert window.batch_size == pytest.approx((12_000 - 20) / 400)
    assert window.prefill_busy_seconds == pytest.approx(2.5)
    assert window.decode_busy_seconds == pytest.approx(6.0)
    assert window.mean_prompt_tokens == pytest.approx(1_500)
    assert window.context_tokens == pytest.approx(1_500 + 600 / 2)  # mean prompt + half the mean output
    restart = serving_interval(b, reading("tgi-3.3.6-restart.prom"), 10.0)
    assert restart.restarted and (restart.prefill_tokens, restart.decode_tokens) == (4_500, 200)


def test_a_counter_seen_first_counts_from_zero() -> None:
    # Engines create series lazily; a reading without the counter means none of it had happened yet.
    a = reading("vllm-v0.9-v1engine-a.prom")
    bare = type(a)(engine="vllm")
    window = serving_interval(bare, a, 10.0)
    assert not window.restarted
    assert (window.prefill_tokens, window.decode_tokens) == (300_000 - 60_000, 100_000)


def test_a_counter_whose_source_changed_gives_no_increase() -> None:
    # SGLang prints realtime_tokens_total{mode} only after its first log interval; until then generation_tokens_total
    # stands in. The two count differently, so the switch is neither an increase nor a restart.
    before = parse_engine_metrics(
        "\n".join(
            line for line in (FIXTURES / "sglang-0.5-a.prom").read_text().splitlines() if "realtime_tokens" not in line
        )
    )
    after = reading("sglang-0.5-b.prom")
    assert before.sources["generation_tokens"] == "sglang:generation_tokens_total"
    assert after.sources["generation_tokens"] == "sglang:realtime_tokens_total"
    window = serving_interval(before, after, 10.0)
    assert not window.restarted
    assert window.decode_tokens == 0


def test_engine_detection_and_foreign_text() -> None:
    assert detect_engine(["vllm:num_requests_running", "process_cpu_seconds_total"]) == "vllm"
    assert detect_engine(["DCGM_FI_DEV_GPU_UTIL"]) is None
    with pytest.raises(ValueError, match="no vLLM, SGLang or TGI"):
        parse_engine_metrics((Path(__file__).parent / "fixtures" / "dcgm" / "rtx4000ada-k8s-pod.prom").read_text())
    forced = parse_engine_metrics((FIXTURES / "tgi-3.3.6-a.prom").read_text(), engine="tgi")
    assert forced.engine == "tgi"
