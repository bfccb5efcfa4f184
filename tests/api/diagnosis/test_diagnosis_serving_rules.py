"""The serving findings (``mfumon.api.diagnosis.serving_rules``) on crafted ServingFacts: each fires with its exact
evidence and GPU-seconds, stays quiet just short of its threshold, and advises in the engine's own flags."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mfumon.api.diagnosis import JobFacts, diagnose
from mfumon.api.diagnosis import serving_rules as s
from mfumon.api.diagnosis.facts import ServingFacts, ServingIntervalFacts

WATERFALL = {"down": 200.0, "idle": 800.0, "prefill": 3000.0, "decode": 6000.0, "recompute": 0.0}


def intervals(loads: list[float], latencies: list[float | None], **fields: Any) -> tuple[ServingIntervalFacts, ...]:
    """One interval per (prefill load, TPOT p90), 10 s apart; ``fields`` name other figures, the same in each."""
    return tuple(
        ServingIntervalFacts(at=10.0 * i, prefill_tokens_per_second=load, tpot_p90_seconds=latency, **fields)
        for i, (load, latency) in enumerate(zip(loads, latencies, strict=True))
    )


HEALTHY = ServingFacts(
    engine="vllm",
    window_seconds=300.0,
    gpus=8.0,
    requests_per_second=20.0,
    batch_size=32.0,
    requests_running=32.0,
    requests_waiting=0.2,
    kv_cache_usage=0.6,
    max_kv_cache_usage=0.75,
    preemptions=0,
    mbu=0.4,
    prefill_mfu=0.3,
    decode_mfu=0.05,
    ttft_target_seconds=1.0,
    tpot_target_seconds=0.1,
    objective_ratio=0.9,
    ttft_met=(0.95, 0.97),
    tpot_met=(0.96, 0.98),
    goodput=(0.91, 0.95),
    ttft_p90_seconds=0.6,
    tpot_p90_seconds=0.06,
    itl_p99_seconds=0.09,
    intervals=intervals([1000.0, 1100.0, 1200.0, 1300.0, 1400.0, 1500.0], [0.06] * 6, requests_running=32.0),
    waterfall=dict(WATERFALL),
)


def job(**serving: Any) -> JobFacts:
    """A serving job whose engine's view is HEALTHY but for ``serving``."""
    return JobFacts(
        job_id="chat",
        kind="inference",
        gpu_seconds={"compute": 9000.0, "stalled": 1000.0},
        reports_received=30,
        serving=replace(HEALTHY, **serving),
    )


def test_a_healthy_server_has_no_findings() -> None:
    assert diagnose(job()) == []
    assert diagnose(JobFacts(job_id="chat", kind="inference", reports_received=30)) == []  # no engine view at all


# --- decode_memory_bound ---------------------------------------------------------------------------------------


def test_decode_at_the_bandwidth_limit_with_tpot_misses() -> None:
    finding = s.decode_memory_bound(job(mbu=0.72, tpot_met=(0.7, 0.8), tpot_p90_seconds=0.14))
    assert finding is not None and finding.cause == "decode_memory_bound"
    assert finding.gpu_seconds == pytest.approx(6000.0 * 0.2)  # decode x the share certainly over the target
    assert finding.evidence == {
        "mbu": 0.72,
        "mbu_threshold": 0.6,
        "decode_mfu": 0.05,
        "decode_gpu_seconds": 6000.0,
        "tpot_p90_seconds": 0.14,
        "tpot_target_seconds": 0.1,
        "tpot_met_ratio": [0.7, 0.8],
        "objective_ratio": 0.9,
        "requests_over_tpot_target": 0.2,
        "requests_waiting": 0.2,
        "requests_running": 32.0,
        "batch_size": 32.0,
        "engine": "vllm",
        "engine_metrics": {
            "tpot": "vllm:request_time_per_output_token_seconds",
            "requests_waiting": "vllm:num_requests_waiting",
            "requests_running": "vllm:num_requests_running",
        },
    }
    assert "overlap" not in finding.advice.lower()


def test_decode_at_the_bandwidth_limit_with_a_queue() -> None:
    finding = s.decode_memory_bound(job(mbu=0.65, requests_waiting=8.0))
    assert finding is not None and finding.evidence["requests_over_tpot_target"] is None
    assert finding.gpu_seconds == pytest.approx(6000.0 * 8 / 40)  # the waiting requests' share


def test_decode_at_the_limit_judged_by_the_p90_without_histogram_bounds() -> None:
    finding = s.decode_memory_bound(job(mbu=0.7, tpot_met=None, tpot_p90_seconds=0.15))
    assert finding is not None and finding.gpu_seconds == pytest.approx(600.0)  # a p90 over: 10% at least


@pytest.mark.parametrize(
    "serving",
    [
        {"mbu": 0.55, "tpot_met": (0.5, 0.6), "requests_waiting": 8.0},  # misses, but bandwidth is left
        {"mbu": 0.8},  # at the limit, but TPOT met and no queue: a well-fed server
        {"mbu": 0.8, "requests_waiting": 8.0, "kv_cache_usage": 0.3},  # a queue the batch could still take in
        {"mbu": None, "tpot_met": (0.5, 0.6)},
    ],
)
def test_decode_memory_bound_quiet(serving: dict[str, Any]) -> None:
    assert s.decode_memory_bound(job(**serving)) is None


# --- batch_underfilled -----------------------------------------------------------------------------------------


def test_requests_wait_while_the_kv_cache_has_room() -> None:
    flat = intervals([1000.0] * 6, [0.06] * 6, requests_running=16.0)
    finding = s.batch_underfilled(job(requests_waiting=4.0, requests_running=16.0, kv_cache_usage=0.3, intervals=flat))
    assert finding is not None and finding.cause == "batch_underfilled"
    assert finding.gpu_seconds == pytest.approx(6000.0 * 4 / 20)
    assert finding.evidence == {
        "requests_waiting": 4.0,
        "requests_running": 16.0,
        "max_requests_running": 16.0,
        "batch_size": 32.0,
        "kv_cache_usage": 0.3,
        "max_kv_cache_usage": 0.75,
        "waiting_share": 0.2,
        "thresholds": {"requests_waiting": 1.0, "kv_cache_usage_below": 0.5},
        "engine": "vllm",
        "engine_metrics": {
            "requests_waiting": "vllm:num_requests_waiting",
            "requests_running": "vllm:num_requests_running",
            "kv_cache_usage": "vllm:kv_cache_usage_perc",
        },
    }


@pytest.mark.parametrize(
    "serving",
    [
        {"requests_waiting": 4.0, "kv_cache_usage": 0.5},  # the cache is half full: memory may be the limit
        {"requests_waiting": 0.9, "kv_cache_usage": 0.2},  # no standing queue
        {"requests_waiting": 4.0, "kv_cache_usage": None},  # TGI exports no KV use: cannot tell cap from memory
    ],
)
def test_batch_underfilled_quiet(serving: dict[str, Any]) -> None:
    assert s.batch_underfilled(job(**serving)) is None


# --- kv_cache_saturated ----------------------------------------------------------------------------------------


def test_a_full_kv_cache_with_preemptions_costs_the_recompute() -> None:
    finding = s.kv_cache_saturated(
        job(max_kv_cache_usage=0.97, preemptions=25, waterfall=WATERFALL | {"recompute": 450.0})
    )
    assert finding is not None and finding.cause == "kv_cache_saturated"
    assert finding.gpu_seconds == 450.0
    assert finding.evidence == {
        "max_kv_cache_usage": 0.97,
        "kv_cache_usage": 0.6,
        "preemptions": 25,
        "window_seconds": 300.0,
        "requests_finished": 6000.0,
        "recompute_gpu_seconds": 450.0,
        "thresholds": {"max_kv_cache_usage": 0.9, "preemptions": 1},
        "engine": "vllm",
        "engine_metrics": {"kv_cache_usage": "vllm:kv_cache_usage_perc", "preemptions": "vllm:num_preemptions_total"},
    }


def test_without_a_recompute_category_the_preempted_share_of_prefill_is_at_stake() -> None:
    finding = s.kv_cache_saturated(job(max_kv_cache_usage=0.95, preemptions=60))
    assert finding is not None and finding.gpu_seconds == pytest.approx(3000.0 * 60 / 6000)


def test_the_peak_kv_use_may_come_from_the_intervals() -> None:
    peaked = intervals([1000.0] * 6, [0.06] * 6, kv_cache_usage=0.92)
    finding = s.kv_cache_saturated(job(max_kv_cache_usage=None, preemptions=3, intervals=peaked))
    assert finding is not None and finding.evidence["max_kv_cache_usage"] == 0.92


@pytest.mark.parametrize(
    "serving",
    [
        {"max_kv_cache_usage": 0.97, "preemptions": 0},
        {"max_kv_cache_usage": 0.97, "preemptions": None},  # TGI counts no preemptions
        {"max_kv_cache_usage": 0.85, "preemptions": 10},  # preempted, but the cache had room: not this cause
    ],
)
def test_kv_cache_saturated_quiet(serving: dict[str, Any]) -> None:
    assert s.kv_cache_saturated(job(**serving)) is None


# --- prefill_interference --------------------------------------------------------------------------------------

LOADS = [100.0, 200.0, 300.0, 4000.0, 5000.0, 6000.0]


def test_tpot_under_heavy_prefill_is_named_with_both_sides() -> None:
    tpot = [0.05, 0.05, 0.06, 0.06, 0.15, 0.2]
    finding = s.prefill_interference(job(intervals=intervals(LOADS[::-1], tpot[::-1])))  # order does not matter
    assert finding is not None and finding.cause == "prefill_interference"
    assert finding.evidence == {
        "latency": "tpot_p90_seconds",
        "heavy_prefill_latency_seconds": 0.175,
        "light_prefill_latency_seconds": 0.05,
        "ratio": 3.5,
        "prefill_load": "prefill_tokens_per_second",
        "heavy_prefill_load": 5500.0,
        "light_prefill_load": 150.0,
        "intervals": 6,
        "intervals_per_side": 2,
        "tpot_target_seconds": 0.1,
        "threshold_ratio": 1.5,
        "engine": "vllm",
        "engine_metrics": {"tpot": "vllm:request_time_per_output_token_seconds"},
    }
    assert finding.gpu_seconds == pytest.approx(6000.0 / 3 * (1 - 0.05 / 0.175))


def test_prefill_interference_falls_back_to_itl_and_the_mean_prompt() -> None:
    rows = tuple(
        ServingIntervalFacts(at=10.0 * i, mean_prompt_tokens=load, itl_p99_seconds=itl)
        for i, (load, itl) in enumerate(zip(LOADS, [0.04, 0.04, 0.05, 0.05, 0.12, 0.14], strict=True))
    )
    finding = s.prefill_interference(job(engine="sglang", intervals=rows))
    assert finding is not None
    assert (finding.evidence["latency"], finding.evidence["prefill_load"]) == ("itl_p99_seconds", "mean_prompt_tokens")
    assert finding.evidence["engine_metrics"] == {"itl": "sglang:inter_token_latency_seconds"}


@pytest.mark.parametrize(
    ("loads", "tpot"),
    [
        (LOADS, [0.02, 0.02, 0.03, 0.03, 0.05, 0.06]),  # 2.75x, but within the 0.1 s target under heavy prefill
        (LOADS, [0.08, 0.08, 0.09, 0.09, 0.11, 0.11]),  # over the target, but only 1.375x
        (LOADS[:5], [0.05, 0.05, 0.06, 0.15, 0.2]),  # five intervals: too few to compare thirds
        ([1000.0] * 6, [0.05, 0.05, 0.06, 0.06, 0.15, 0.2]),  # the load does not vary
    ],
)
def test_prefill_interference_quiet(loads: list[float], tpot: list[float]) -> None:
    assert s.prefill_interference(job(intervals=intervals(loads, list(tpot)))) is None


# --- idle_replicas ---------------------------------------------------------------------------------------------


def test_half_the_allocation_idle_on_several_gpus() -> None:
    waterfall = {"down": 100.0, "idle": 6000.0, "prefill": 1000.0, "decode": 2900.0, "recompute": 0.0}
    finding = s.idle_replicas(job(waterfall=waterfall))
    assert finding is not None and finding.cause == "idle_replicas"
    assert finding.gpu_seconds == 6000.0
    assert finding.evidence == {
        "gpus": 8.0,
        "idle_gpu_seconds": 6000.0,
        "idle_share_of_allocated": 0.6,
        "requests_per_second": 20.0,
        "requests_per_gpu_second": 2.5,
        "requests_running_per_gpu": 4.0,
        "thresholds": {"idle_share": 0.5, "requests_per_gpu_second": 0.01, "requests_running_per_gpu": 1.0},
        "engine": "vllm",
        "engine_metrics": {
            "requests_waiting": "vllm:num_requests_waiting",
            "requests_running": "vllm:num_requests_running",
        },
    }
    assert "(vllm:num_requests_waiting, vllm:num_requests_running)" in finding.advice


def test_almost_no_requests_per_gpu_is_idle_too() -> None:
    finding = s.idle_replicas(job(requests_per_second=0.05, requests_running=2.0))
    assert finding is not None and finding.gpu_seconds == 800.0
    assert finding.evidence["requests_per_gpu_second"] == 0.00625


@pytest.mark.parametrize(
    "serving",
    [
        {"gpus": 1.0, "waterfall": WATERFALL | {"idle": 9000.0}},  # one GPU: only scaling to zero is left
        {"requests_per_second": 0.05, "requests_running": 64.0},  # long generations keep a big batch busy
        {"waterfall": WATERFALL | {"idle": 9000.0, "decode": 0.0, "prefill": 0.0, "down": 9001.0}},  # 49.997% idle
    ],
)
def test_idle_replicas_quiet(serving: dict[str, Any]) -> None:
    assert s.idle_replicas(job(**serving)) is None


# --- slo_misses ------------------------------------------------------------------------------------------------


def test_goodput_certainly_below_the_objective_names_the_worse_target() -> None:
    finding = s.slo_misses(
        job(goodput=(0.5, 0.7), ttft_met=(0.9, 0.95), tpot_met=(0.6, 0.7), tpot_p90_seconds=0.16, itl_p99_seconds=0.3)
    )
    assert finding is not None and finding.cause == "slo_misses"
    assert finding.gpu_seconds == pytest.approx(9000.0 * (0.9 - 0.7))  # working time x the certain shortfall
    assert finding.evidence == {
        "goodput_ratio": [0.5, 0.7],
        "objective_ratio": 0.9,
        "ttft_met_ratio": [0.9, 0.95],
        "tpot_met_ratio": [0.6, 0.7],
        "misses_more": "tpot",
        "ttft_p90_seconds": 0.6,
        "ttft_target_seconds": 1.0,
        "tpot_p90_seconds": 0.16,
        "tpot_target_seconds": 0.1,
        "itl_p99_seconds": 0.3,
        "requests_waiting": 0.2,
        "window_seconds": 300.0,
        "engine": "vllm",
        "engine_metrics": {
            "ttft": "vllm:time_to_first_token_seconds",
            "tpot": "vllm:request_time_per_output_token_seconds",
            "requests_waiting": "vllm:num_requests_waiting",
        },
    }
    assert finding.advice.startswith("Time per output token misses") and "--max-num-seqs" in finding.advice


def test_ttft_misses_with_a_queue_call_for_capacity_without_one_for_faster_prompts() -> None:
    misses = {"goodput": (0.4, 0.6), "ttft_met": (0.5, 0.6), "tpot_met": (0.9, 0.95)}
    queued = s.slo_misses(job(requests_waiting=6.0, **misses))
    assert queued is not None and queued.evidence["misses_more"] == "ttft"
    assert queued.advice.startswith("Time to first token misses while requests queue")
    slow = s.slo_misses(job(**misses))
    assert slow is not None and slow.advice.startswith("Time to first token misses with no queue")
    assert "--enable-prefix-caching" in slow.advice


@pytest.mark.parametrize(
    "serving",
    [
        {"goodput": (0.85, 0.92)},  # maybe below the objective, maybe not: the bounds straddle it
        {"goodput": None, "goodput_reason": "TGI exports no time-to-first-token histogram"},
        {"goodput": (0.5, 0.7), "objective_ratio": None},
    ],
)
def test_slo_misses_quiet(serving: dict[str, Any]) -> None:
    assert s.slo_misses(job(**serving)) is None


# --- advice in each engine's flags -----------------------------------------------------------------------------

TRIGGERS: dict[str, dict[str, Any]] = {
    "decode_memory_bound": {"mbu": 0.72, "tpot_met": (0.7, 0.8)},
    "batch_underfilled": {"requests_waiting": 4.0, "kv_cache_usage": 0.3},
    "kv_cache_saturated": {"max_kv_cache_usage": 0.97, "preemptions": 25},
    "prefill_interference": {"intervals": intervals(LOADS, [0.05, 0.05, 0.06, 0.06, 0.15, 0.2])},
    "slo_misses": {"goodput": (0.5, 0.7), "tpot_met": (0.6, 0.7)},
}
FLAGS: dict[tuple[str, str | None], tuple[str, ...]] = {
    ("decode_memory_bound", "vllm"): (
        "--tensor-parallel-size",
        "--quantization fp8",
        "--kv-cache-dtype fp8",
        "--speculative-config",
    ),
    ("decode_memory_bound", "sglang"): (
        "--tp-size",
        "--dp-size",
        "--kv-cache-dtype fp8_e4m3",
        "--speculative-algorithm",
    ),
    ("decode_memory_bound", "tgi"): ("--num-shard", "--quantize fp8", "--kv-cache-dtype fp8_e4m3fn", "--speculate"),
    ("decode_memory_bound", None): ("tensor parallelism", "fp8 KV cache", "speculative decoding"),
    ("batch_underfilled", "vllm"): ("--max-num-seqs", "--max-num-batched-tokens"),
    ("batch_underfilled", "sglang"): ("--max-running-requests", "--schedule-conservativeness", "--max-prefill-tokens"),
    ("batch_underfilled", "tgi"): ("--max-batch-total-tokens", "--max-batch-size", "--waiting-served-ratio"),
    ("batch_underfilled", None): ("--max-num-seqs", "--max-running-requests", "--max-batch-total-tokens"),
    ("kv_cache_saturated", "vllm"): ("--gpu-memory-utilization", "--kv-cache-dtype fp8", "--max-num-seqs"),
    ("kv_cache_saturated", "sglang"): (
        "--mem-fraction-static",
        "--kv-cache-dtype fp8_e4m3",
        "--schedule-conservativeness",
    ),
    ("kv_cache_saturated", "tgi"): ("--kv-cache-dtype fp8_e4m3fn", "--num-shard", "--max-batch-total-tokens"),
    ("kv_cache_saturated", None): ("--gpu-memory-utilization", "--mem-fraction-static"),
    ("prefill_interference", "vllm"): (
        "--enable-chunked-prefill",
        "--max-num-batched-tokens",
        "--kv-transfer-config",
    ),
    ("prefill_interference", "sglang"): ("--chunked-prefill-size", "--disaggregation-mode"),
    ("prefill_interference", "tgi"): ("--max-batch-prefill-tokens", "--max-waiting-tokens", "--waiting-served-ratio"),
    ("prefill_interference", None): (
        "--max-num-batched-tokens",
        "--chunked-prefill-size",
        "--max-batch-prefill-tokens",
        "disaggregated prefill",
    ),
    ("slo_misses", "vllm"): ("--max-num-seqs", "--tensor-parallel-size", "--speculative-config"),
    ("slo_misses", "sglang"): ("--max-running-requests", "--tp-size", "--speculative-algorithm"),
    ("slo_misses", "tgi"): ("--max-batch-total-tokens", "--num-shard", "--speculate"),
    ("slo_misses", None): ("--max-num-seqs", "--max-running-requests", "speculative decoding"),
}
#: a flag only one engine has, which another engine's advice must not carry
OWN = {"vllm": "--tensor-parallel-size", "sglang": "--tp-size", "tgi": "--num-shard"}


@pytest.mark.parametrize(("cause", "engine"), sorted(FLAGS, key=lambda k: (k[0], k[1] or "")))
def test_advice_uses_the_engines_own_flags(cause: str, engine: str | None) -> None:
    found = {f.cause: f for f in diagnose(job(engine=engine, **TRIGGERS[cause]))}
    advice = found[cause].advice
    for flag in FLAGS[(cause, engine)]:
        assert flag in advice, flag
    if engine is not None:
        for other, flag in OWN.items():
            if other != engine:
                assert flag not in advice, (engine, flag)


def test_idle_replicas_cite_each_engines_gauges_for_autoscaling() -> None:
    idle = WATERFALL | {"idle": 12000.0}
    for engine, names in [
        ("sglang", "(sglang:num_queue_reqs, sglang:num_running_reqs)"),
        ("tgi", "(tgi_queue_size, tgi_batch_current_size)"),
    ]:
        finding = s.idle_replicas(job(engine=engine, waterfall=idle))
        assert finding is not None and names in finding.advice
    generic = s.idle_replicas(job(engine=None, waterfall=idle))
    assert generic is not None and "running requests, down to" in generic.advice
    assert generic.evidence["engine_metrics"] == {}


def test_serving_findings_rank_by_the_gpu_seconds_at_stake() -> None:
    facts = job(
        waterfall={"down": 100.0, "idle": 6000.0, "prefill": 1000.0, "decode": 2900.0, "recompute": 300.0},
        max_kv_cache_usage=0.97,
        preemptions=25,
        mbu=0.7,
        requests_waiting=8.0,
        kv_cache_usage=0.4,
        goodput=(0.5, 0.7),
        tpot_met=(0.6, 0.7),
    )
    ranked = [(f.cause, round(f.gpu_seconds, 1)) for f in diagnose(facts)]
    assert ranked == [
        ("idle_replicas", 6000.0),
        ("decode_memory_bound", 870.0),  # decode 2900 x 0.3 over TPOT (the queue, with cache room, is not its)
        ("slo_misses", 840.0),  # working 4200 x (0.9 - 0.7)
        ("batch_underfilled", 580.0),  # decode 2900 x 8/40
        ("kv_cache_saturated", 300.0),
    ]


def test_evidence_cites_the_engines_own_metric_names() -> None:
    full = {"max_kv_cache_usage": 0.97, "preemptions": 25}
    sglang = s.kv_cache_saturated(job(engine="sglang", **full))
    assert sglang is not None and sglang.evidence["engine_metrics"] == {
        "kv_cache_usage": "sglang:token_usage",
        "preemptions": "sglang:num_retracted_requests_total",
    }
    tgi = s.slo_misses(job(engine="tgi", goodput=(0.5, 0.7), tpot_met=(0.6, 0.7)))
    assert tgi is not None and tgi.evidence["engine_metrics"] == {
        "tpot": "tgi_request_mean_time_per_token_duration",
        "requests_waiting": "tgi_queue_size",
    }
    unknown = s.kv_cache_saturated(job(engine=None, **full))
    assert unknown is not None and unknown.evidence["engine_metrics"] == {} and unknown.evidence["engine"] is None
