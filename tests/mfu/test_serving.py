"""MBU and MFU by phase, checked against figures computed by hand (each test shows the arithmetic)."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import pytest

from mfumon.mfu import (
    FORMULAS,
    ModelShape,
    PeakTable,
    PhaseResult,
    ServingResult,
    ServingWindow,
    compute_mbu,
    decode_step_bytes,
    evaluate,
    evaluate_serving,
    kv_cache_bytes_per_token,
    weight_bytes,
)
from mfumon.mfu._serving import storage_dtype_for

# A 70B Llama-3-shaped model: 80 layers, 64 query heads of 128, 8 KV heads (GQA).
LLAMA_70B = ModelShape(params=70e9, layers=80, heads=64, kv_heads=8, head_dim=128)
H100_SXM_BANDWIDTH = 3.35e12  # bytes/s per GPU (NVIDIA H100 product page)
H100_SXM_BF16 = 989e12  # dense FLOP/s per GPU


def test_worked_example_of_the_readme_70b_bf16_on_8_h100_batch_32_context_2k() -> None:
    # weights:          70e9 params x 2 bytes                               = 140,000,000,000 bytes
    # KV per token:     2 (K,V) x 80 layers x 8 KV heads x 128 x 2 bytes     =         327,680 bytes
    # KV per step:      32 sequences x 2048 tokens x 327,680                 =  21,474,836,480 bytes
    # bytes per step:   140e9 + 21,474,836,480                               = 161,474,836,480 bytes
    # steps per second: 2,000 decode tokens/s / 32 per step                  = 62.5 (16 ms per step)
    # bytes per second: 161,474,836,480 x 62.5                               = 10,092,177,280,000
    # MBU:              10.092e12 / (8 x 3.35e12 = 26.8e12)                  = 0.37657...
    # decode FLOPs/tok: 2 x 70e9 + 4 x 80 x 64 x 128 x 2048 = 140e9 + 5,368,709,120 = 145,368,709,120
    # decode MFU:       2,000 x 145,368,709,120 / (8 x 989e12 = 7.912e15)    = 0.036746...
    window = ServingWindow(
        interval_seconds=10, prefill_tokens=0, decode_tokens=20_000, batch_size=32, context_tokens=2048
    )
    result = evaluate_serving(
        shape=LLAMA_70B,
        window=window,
        num_gpus=8,
        peak_flops_per_gpu=H100_SXM_BF16,
        peak_bandwidth_per_gpu=H100_SXM_BANDWIDTH,
    )
    assert result.weight_bytes == 140_000_000_000
    assert result.kv_cache_bytes_per_token == 327_680
    assert result.decode_step_kv_cache_bytes == 21_474_836_480
    assert result.decode_step_bytes == 161_474_836_480
    assert result.memory_bytes_per_second == pytest.approx(10_092_177_280_000)
    assert result.mbu == pytest.approx(10_092_177_280_000 / 26.8e12)
    decode = result.phases["decode"]
    assert decode.flops_per_token == 145_368_709_120
    assert decode.mfu == pytest.approx(2_000 * 145_368_709_120 / 7.912e15)
    assert result.mfu == pytest.approx(decode.mfu)  # no prefill in this window
    assert result.phases["prefill"].mfu == 0


def test_the_same_example_through_evaluate_with_the_peak_table() -> None:
    window = ServingWindow(
        interval_seconds=10, prefill_tokens=0, decode_tokens=20_000, batch_size=32, context_tokens=2048
    )
    result = evaluate(
        kind="inference",
        shape=LLAMA_70B,
        tokens_per_second=window.tokens_per_second,
        num_gpus=8,
        device_name="NVIDIA H100 80GB HBM3",
        serving=window,
    )
    assert result.serving is not None
    assert result.serving.mbu == pytest.approx(10_092_177_280_000 / 26.8e12)
    assert result.mfu == pytest.approx(2_000 * 145_368_709_120 / 7.912e15)
    assert result.flops_per_token == pytest.approx(145_368_709_120)
    assert result.serving.peak_memory_bytes_per_second == pytest.approx(26.8e12)
    assert "nvidia.com" in (result.serving.bandwidth_source or "")


@pytest.mark.parametrize(
    ("kv_heads", "expected"),
    [
        (8, 327_680),  # GQA: 2 x 80 x 8 x 128 x 2
        (1, 40_960),  # MQA: 2 x 80 x 1 x 128 x 2
        (None, 2_621_440),  # MHA assumed: 2 x 80 x 64 x 128 x 2
    ],
)
def test_kv_cache_bytes_count_kv_heads_not_query_heads(kv_heads: int | None, expected: int) -> None:
    shape = ModelShape(params=70e9, layers=80, heads=64, kv_heads=kv_heads, head_dim=128)
    assert kv_cache_bytes_per_token(shape, "bf16") == expected


def test_mha_assumption_is_stated() -> None:
    shape = ModelShape(params=7e9, layers=32, heads=32, head_dim=128)
    window = ServingWindow(interval_seconds=1, prefill_tokens=0, decode_tokens=100, batch_size=4, context_tokens=100)
    result = evaluate_serving(
        shape=shape, window=window, num_gpus=1, peak_flops_per_gpu=1e15, peak_bandwidth_per_gpu=2e12
    )
    assert any("kv_heads" in line for line in result.assumptions)


@pytest.mark.parametrize(
    ("dtype", "bytes_per_weight"), [("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)]
)
def test_weight_bytes_follow_the_serving_dtype(dtype: str, bytes_per_weight: float) -> None:
    assert weight_bytes(ModelShape(params=8e9), dtype) == 8e9 * bytes_per_weight  # type: ignore[arg-type]


def test_moe_reads_its_active_parameters() -> None:
    # Mixtral-8x7B: 46.7e9 parameters, 12.9e9 active per token.
    assert weight_bytes(ModelShape(params=46.7e9, active_params=12.9e9), "bf16") == 25.8e9


def test_int4_weights_with_fp8_kv_cache() -> None:
    # 8B int4: 8e9 x 0.5 = 4e9 bytes. KV per token with fp8: 2 x 32 x 8 x 128 x 1 = 65,536 bytes.
    # Batch 16 x context 4096 x 65,536 = 4,294,967,296 bytes; step = 8,294,967,296 bytes.
    # 1,600 decode tokens/s / 16 = 100 steps/s -> 829,496,729,600 bytes/s; on one L40S (864e9 B/s): 0.96006...
    shape = ModelShape(params=8e9, layers=32, heads=32, kv_heads=8, head_dim=128)
    window = ServingWindow(interval_seconds=1, prefill_tokens=0, decode_tokens=1600, batch_size=16, context_tokens=4096)
    result = evaluate_serving(
        shape=shape,
        window=window,
        num_gpus=1,
        peak_flops_per_gpu=362e12,
        peak_bandwidth_per_gpu=864e9,
        weight_dtype="int4",
        kv_cache_dtype="fp8",
    )
    assert result.decode_step_bytes == 8_294_967_296
    assert result.mbu == pytest.approx(829_496_729_600 / 864e9)


def test_phase_mfus_add_up_to_the_job_mfu() -> None:
    # Prefill: 4,000 prompt tokens/s at a mean prompt of 1,500 tokens:
    #   FLOPs/token = 140e9 + 4 x 80 x 64 x 128 x 1500 = 143,932,160,000; MFU = 4,000 x that / 7.912e15 = 0.072766...
    # Decode: 2,000 tokens/s at context 2,048 (as above): 0.036746...
    window = ServingWindow(
        interval_seconds=10,
        prefill_tokens=40_000,
        decode_tokens=20_000,
        batch_size=32,
        context_tokens=2048,
        prompt_tokens=1500,
    )
    result = evaluate_serving(
        shape=LLAMA_70B, window=window, num_gpus=8, peak_flops_per_gpu=H100_SXM_BF16, peak_bandwidth_per_gpu=None
    )
    prefill, decode = result.phases["prefill"], result.phases["decode"]
    assert prefill.flops_per_token == 143_932_160_000
    assert prefill.mfu == pytest.approx(4_000 * 143_932_160_000 / 7.912e15)
    assert decode.mfu == pytest.approx(2_000 * 145_368_709_120 / 7.912e15)
    assert result.mfu == pytest.approx(prefill.mfu + decode.mfu)
    assert result.mbu is None and "bandwidth" in (result.mbu_reason or "")


def test_active_mfu_divides_by_the_time_the_engine_spent_in_the_phase() -> None:
    # 40,000 prefill tokens x 143,932,160,000 FLOPs = 5.7572864e15 FLOPs in 1.5 busy seconds on 8 x 989e12:
    # 5.7572864e15 / (1.5 x 7.912e15) = 0.485109...
    window = ServingWindow(
        interval_seconds=10, prefill_tokens=40_000, decode_tokens=0, prompt_tokens=1500, prefill_seconds=1.5
    )
    result = evaluate_serving(
        shape=LLAMA_70B, window=window, num_gpus=8, peak_flops_per_gpu=H100_SXM_BF16, peak_bandwidth_per_gpu=3.35e12
    )
    assert result.phases["prefill"].active_mfu == pytest.approx(5.7572864e15 / (1.5 * 7.912e15))
    assert result.phases["decode"].active_mfu is None
    assert result.mbu == 0.0  # no decode step ran in the window


def test_missing_inputs_give_a_reason_not_a_guess() -> None:
    base = {"interval_seconds": 1.0, "prefill_tokens": 0.0, "decode_tokens": 100.0, "context_tokens": 512.0}
    no_batch = evaluate_serving(
        shape=LLAMA_70B,
        window=ServingWindow(**base),
        num_gpus=8,
        peak_flops_per_gpu=H100_SXM_BF16,
        peak_bandwidth_per_gpu=H100_SXM_BANDWIDTH,
    )
    assert no_batch.mbu is None and "batch_size" in (no_batch.mbu_reason or "")
    no_shape = evaluate_serving(
        shape=ModelShape(params=70e9),
        window=ServingWindow(**base, batch_size=4),
        num_gpus=8,
        peak_flops_per_gpu=H100_SXM_BF16,
        peak_bandwidth_per_gpu=H100_SXM_BANDWIDTH,
    )
    assert no_shape.mbu is None and "head_dim" in (no_shape.mbu_reason or "")


def test_an_mbu_above_one_is_rejected_with_a_reason() -> None:
    window = ServingWindow(interval_seconds=1, prefill_tokens=0, decode_tokens=1e6, batch_size=1, context_tokens=10)
    result = evaluate_serving(
        shape=LLAMA_70B, window=window, num_gpus=8, peak_flops_per_gpu=H100_SXM_BF16, peak_bandwidth_per_gpu=3.35e12
    )
    assert result.mbu is None
    assert "implausible MBU" in (result.mbu_reason or "")


def test_building_blocks() -> None:
    assert decode_step_bytes(100.0, 2.0, batch_size=3, context_tokens=5) == 130.0  # 100 + 3 x 5 x 2
    assert compute_mbu(5e12, 2, 5e12) == 0.5
    assert set(FORMULAS) >= {"mbu", "decode_step_bytes", "kv_cache_bytes_per_token", "flops_per_token"}


def test_bandwidth_lookup_cites_its_source_and_refuses_mig_slices() -> None:
    table = PeakTable()
    h100 = table.bandwidth("NVIDIA H100 80GB HBM3")
    assert h100.bytes_per_second == 3.35e12 and h100.device_key == "h100-sxm"
    assert h100.source and "h100" in h100.source.lower()
    mig = table.bandwidth("NVIDIA A100-SXM4-80GB MIG 3g.40gb")
    assert mig.bytes_per_second is None and "MIG" in (mig.reason or "")
    unknown = table.bandwidth("NVIDIA RTX 9999")
    assert unknown.bytes_per_second is None and "unknown device" in (unknown.reason or "")
    assert table.bandwidth("TPU v4").reason is not None  # no sourced figure: unknown, never guessed


def test_a_training_job_cannot_send_a_phase_split() -> None:
    window = ServingWindow(interval_seconds=1, prefill_tokens=1, decode_tokens=1)
    with pytest.raises(ValueError, match="inference"):
        evaluate(kind="training", shape=LLAMA_70B, tokens_per_second=2, num_gpus=1, serving=window)


# -- boundaries (issue 36) ----------------------------------------------------------------------------------------
# A small model whose figures are powers of two, so every ratio below is exact:
#   inference FLOPs/token = 2 x 2^30 + 4 x 4 x 8 x 16 x T = 2^31 + 2048 T
#   weights (bf16) = 2^31 bytes; KV per token (bf16) = 2 x 4 layers x 2 KV heads x 16 x 2 = 512 bytes
SMALL = ModelShape(params=2**30, layers=4, heads=8, head_dim=16, kv_heads=2)
PREFILL_FLOPS_PER_TOKEN = 2**31 + 2048 * 512  # mean prompt 512 tokens: 2,148,532,224
DECODE_FLOPS_PER_TOKEN = 2**31 + 2048 * 1024  # mean context 1,024 tokens: 2,149,580,800
# 4 s: 4,096 prompt tokens (1,024/s) and 2,048 decoded (512/s) in steps of 8 sequences; busy 2 s and 3 s.
WINDOW = ServingWindow(
    interval_seconds=4,
    prefill_tokens=4096,
    decode_tokens=2048,
    batch_size=8,
    context_tokens=1024,
    prompt_tokens=512,
    prefill_seconds=2,
    decode_seconds=3,
)
PEAK_FLOPS = 2.0**42  # per GPU; 2 GPUs: 2^43
PEAK_BANDWIDTH = 2.0**38  # bytes/s per GPU; 2 GPUs: 2^39


def test_every_figure_of_a_window_with_differing_prefill_and_decode_context() -> None:
    # prefill: 1,024 x 2,148,532,224 = 2^41 + 2^30 FLOP/s; / 2^43 = 0.2501220703125; active: x 4 s / 2 s busy
    # decode:    512 x 2,149,580,800 = 2^40 + 2^30 FLOP/s; / 2^43 = 0.1251220703125; active: x 4 s / 3 s busy
    # MBU: (2^31 + 8 x 1,024 x 512 = 2^31 + 2^22 bytes a step) x 64 steps/s (2,048 / 4 s / 8) / 2^39 = 0.25048828125
    result = evaluate_serving(
        shape=SMALL,
        window=WINDOW,
        num_gpus=2,
        peak_flops_per_gpu=PEAK_FLOPS,
        peak_bandwidth_per_gpu=PEAK_BANDWIDTH,
        bandwidth_source="datasheet",
    )
    assert result == ServingResult(
        phases={
            "prefill": PhaseResult(
                1024.0, 512, PREFILL_FLOPS_PER_TOKEN, 2**41 + 2**30, 0.2501220703125, 0.500244140625, 2
            ),
            "decode": PhaseResult(
                512.0,
                1024,
                DECODE_FLOPS_PER_TOKEN,
                2**40 + 2**30,
                0.1251220703125,
                2048 * DECODE_FLOPS_PER_TOKEN / (3 * 2.0**43),
                3,
            ),
        },
        mfu=0.375244140625,
        model_flops_per_second=2**41 + 2**40 + 2**31,
        mbu=0.25048828125,
        mbu_reason=None,
        weight_dtype="bf16",
        kv_cache_dtype="bf16",
        batch_size=8,
        context_tokens=1024,
        weight_bytes=2**31,
        kv_cache_bytes_per_token=512,
        decode_step_weight_bytes=2**31,
        decode_step_kv_cache_bytes=2**22,
        memory_bytes_per_second=64 * (2**31 + 2**22),
        peak_memory_bytes_per_second=2**39,
        bandwidth_source="datasheet",
        assumptions=(),
    )


def test_the_json_of_a_window() -> None:
    result = evaluate_serving(
        shape=SMALL,
        window=WINDOW,
        num_gpus=2,
        peak_flops_per_gpu=PEAK_FLOPS,
        peak_bandwidth_per_gpu=PEAK_BANDWIDTH,
        bandwidth_source="datasheet",
    )
    assert result.as_json(SMALL) == {
        "phases": {name: vars(phase) for name, phase in result.phases.items()},
        "mfu": 0.375244140625,
        "mbu": 0.25048828125,
        "mbu_reason": None,
        "batch_size": 8,
        "context_tokens": 1024,
        "weight_dtype": "bf16",
        "kv_cache_dtype": "bf16",
        "weight_bytes": 2**31,
        "kv_cache_bytes_per_token": 512,
        "decode_step_bytes": {"weights": 2**31, "kv_cache": 2**22, "total": 2**31 + 2**22},
        "memory_bytes_per_second": 64 * (2**31 + 2**22),
        "peak_memory_bytes_per_second": 2**39,
        "bandwidth_source": "datasheet",
        "formulas": FORMULAS,
        "symbols": {"N": 2**30, "L": 4, "H": 8, "H_kv": 2, "Q": 16, "B": 8, "T": 1024, "b_w": 2.0, "b_kv": 2.0},
        "assumptions": [],
        # no estimate of the engine's own in this window
        "engine_flops_per_second": None,
        "engine_mfu": None,
        "engine_memory_bytes_per_second": None,
        "engine_mbu": None,
    }
    assert result.as_json(SMALL)["phases"]["decode"]["busy_seconds"] == 3
    mha = ModelShape(params=2**30, layers=4, heads=8, head_dim=16)
    assert result.as_json(mha)["symbols"]["H_kv"] == 8  # no kv_heads: every head keeps its K and V
    moe = ModelShape(params=2**31, active_params=2**30)
    assert result.as_json(moe)["symbols"]["N"] == 2**30


def test_evaluate_takes_the_mean_flops_per_token_of_both_phases() -> None:
    # 1,536 tokens/s in all: the mean FLOPs per token is the combined FLOP/s over them, not decode's figure; an
    # inference report recomputes nothing, so HFU = MFU.
    result = evaluate(
        kind="inference",
        shape=SMALL,
        tokens_per_second=WINDOW.tokens_per_second,
        num_gpus=2,
        peak_flops_per_gpu=PEAK_FLOPS,
        peak_memory_bandwidth_per_gpu=PEAK_BANDWIDTH,
        serving=WINDOW,
        recompute_activations=False,
    )
    combined = 2**41 + 2**40 + 2**31
    assert WINDOW.tokens_per_second == 1536
    assert result.flops_per_token == combined / 1536
    assert result.hardware_flops_per_token == combined / 1536
    assert result.model_flops_per_second == combined
    assert (result.mfu, result.hfu) == (0.375244140625, 0.375244140625)
    assert result.serving is not None and result.serving.mbu == 0.25048828125
    assert result.serving.mfu == 0.375244140625
    assert result.serving.phases["prefill"].mfu == 0.2501220703125
    assert result.serving.bandwidth_source == "peak_memory_bandwidth_per_gpu sent by the job"
    assert result.serving.peak_memory_bytes_per_second == 2**39


def test_evaluate_without_recompute_flag_has_no_hardware_flops() -> None:
    result = evaluate(
        kind="inference", shape=SMALL, tokens_per_second=1536, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, serving=WINDOW
    )
    assert (result.hardware_flops_per_token, result.hfu) == (None, None)


def test_evaluate_of_an_idle_window_takes_decode_flops_per_token() -> None:
    idle = ServingWindow(interval_seconds=4, prefill_tokens=0, decode_tokens=0, batch_size=8, context_tokens=1024)
    result = evaluate(
        kind="inference", shape=SMALL, tokens_per_second=0.0, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, serving=idle
    )
    assert (result.flops_per_token, result.mfu) == (DECODE_FLOPS_PER_TOKEN, 0.0)


def test_evaluate_of_a_slow_window_still_takes_the_mean() -> None:
    # 2 tokens in 4 s (0.5/s): one prompt token at T=512 and one decoded at T=1,024.
    slow = ServingWindow(
        interval_seconds=4, prefill_tokens=1, decode_tokens=1, batch_size=1, context_tokens=1024, prompt_tokens=512
    )
    result = evaluate(
        kind="inference", shape=SMALL, tokens_per_second=0.5, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, serving=slow
    )
    assert result.flops_per_token == (PREFILL_FLOPS_PER_TOKEN + DECODE_FLOPS_PER_TOKEN) / 2


def test_a_job_supplied_bandwidth_serves_a_mig_slice() -> None:
    # The table has no bandwidth for a MIG slice; the job's own figure gives the MBU. 10 tokens/s of a 1e9-param
    # bf16 model at batch 1, context 1, 4 bytes of KV a token: (2e9 + 4) x 10 bytes/s over 1e11.
    shape = ModelShape(params=1e9, layers=1, heads=1, head_dim=1)
    window = ServingWindow(interval_seconds=1, prefill_tokens=0, decode_tokens=10, batch_size=1, context_tokens=1)
    arguments: dict[str, Any] = {
        "kind": "inference",
        "shape": shape,
        "tokens_per_second": 10,
        "num_gpus": 1,
        "device_name": "NVIDIA A100-SXM4-40GB",
        "mig_profile": "1g.5gb",
        "serving": window,
    }
    without = evaluate(**arguments)
    assert without.serving is not None and without.serving.mbu is None
    assert without.serving.mbu_reason == (
        "memory bandwidth of a MIG slice of a100-sxm-40gb is not modelled: send peak_memory_bandwidth_per_gpu"
    )
    given = evaluate(**arguments, peak_memory_bandwidth_per_gpu=1e11)
    assert given.serving is not None
    assert given.serving.mbu == (2e9 + 4) * 10 / 1e11
    assert given.serving.peak_memory_bytes_per_second == 1e11


@pytest.mark.parametrize(
    ("dtype", "storage"), [("bf16", "bf16"), ("fp16", "fp16"), ("fp8", "bf16"), ("tf32", "fp32"), ("fp32", "fp32")]
)
def test_storage_follows_the_compute_dtype_unless_named(dtype: str, storage: str) -> None:
    assert storage_dtype_for(dtype) == storage
    result = evaluate(
        kind="inference",
        shape=SMALL,
        tokens_per_second=1536,
        num_gpus=2,
        peak_flops_per_gpu=PEAK_FLOPS,
        serving=WINDOW,
        dtype=dtype,  # type: ignore[arg-type]
    )
    assert result.serving is not None
    assert (result.serving.weight_dtype, result.serving.kv_cache_dtype) == (storage, storage)
    named = evaluate(
        kind="inference",
        shape=SMALL,
        tokens_per_second=1536,
        num_gpus=2,
        peak_flops_per_gpu=PEAK_FLOPS,
        serving=WINDOW,
        dtype=dtype,  # type: ignore[arg-type]
        weight_dtype="int4",
        kv_cache_dtype="fp8",
    )
    assert named.serving is not None
    assert (named.serving.weight_dtype, named.serving.kv_cache_dtype) == ("int4", "fp8")


def test_an_unknown_compute_dtype_stores_bf16() -> None:
    assert storage_dtype_for("int4") == "bf16"


def _mbu_of(decode_tokens: float, peak_bandwidth_per_gpu: float) -> ServingResult:
    # One 2^30-param bf16 model, 1 layer x 1 head x 1: a step at batch 1, context 1 reads 2^31 + 4 bytes.
    shape = ModelShape(params=2**30, layers=1, heads=1, head_dim=1)
    window = ServingWindow(
        interval_seconds=1, prefill_tokens=0, decode_tokens=decode_tokens, batch_size=1, context_tokens=1
    )
    return evaluate_serving(
        shape=shape, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=peak_bandwidth_per_gpu
    )


def test_an_mbu_of_exactly_one_is_plausible() -> None:
    result = _mbu_of(1, 2.0**31 + 4)
    assert (result.mbu, result.mbu_reason) == (1.0, None)


def test_an_mbu_just_above_one_is_implausible() -> None:
    result = _mbu_of(1.01, 2.0**31 + 4)
    assert result.mbu is None
    assert result.mbu_reason == "implausible MBU 1.01 > 1: the batch size, context, model shape or dtypes are wrong"
    assert result.memory_bytes_per_second == (2.0**31 + 4) * 1.01
    assert result.decode_step_kv_cache_bytes == 4


def test_no_peak_flops_gives_no_mfu_but_keeps_the_flops() -> None:
    result = _mbu_of(1, 2.0**32)
    assert result.mfu is None
    assert result.phases["decode"] == PhaseResult(1.0, 1, 2.0**31 + 4, 2.0**31 + 4, None, None, None)
    assert result.model_flops_per_second == 2.0**31 + 4


def test_no_decode_step_reads_nothing() -> None:
    result = _mbu_of(0, 2.0**32)
    assert (result.mbu, result.memory_bytes_per_second, result.mbu_reason) == (0.0, 0.0, None)


@pytest.mark.parametrize(
    ("batch_size", "decode_tokens", "taken_as", "assumed"),
    [(0.5, 10, 1.0, True), (0.5, 0.5, 1.0, True), (1, 10, 1, False), (1.5, 10, 1.5, False), (0.5, 0, 0.5, False)],
)
def test_a_batch_below_one_while_decoding_is_taken_as_one(
    batch_size: float, decode_tokens: float, taken_as: float, assumed: bool
) -> None:
    window = ServingWindow(
        interval_seconds=1,
        prefill_tokens=0,
        decode_tokens=decode_tokens,
        batch_size=batch_size,
        context_tokens=8,
        prompt_tokens=8,
    )
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=2.0**40
    )
    assert result.batch_size == taken_as
    expected = (f"batch_size {batch_size:g} < 1 while decoding: taken as 1 sequence per step",) if assumed else ()
    assert result.assumptions == expected


def test_contexts_taken_from_the_model_are_stated() -> None:
    window = ServingWindow(interval_seconds=1, prefill_tokens=10, decode_tokens=10, batch_size=2)
    shape = ModelShape(params=2**30, layers=4, heads=8, head_dim=16, seq_len=100)
    result = evaluate_serving(
        shape=shape, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=None
    )
    assert result.assumptions == (
        "decode context taken as model.seq_len (100): the report sent no context_tokens",
        "prefill attention span taken as the decode context: the report sent no prompt_tokens",
        "model.kv_heads not given: every head keeps its own K and V (MHA); GQA models read less",
    )
    assert (result.phases["prefill"].context_tokens, result.phases["decode"].context_tokens) == (100, 100)
    assert result.context_tokens == 100


def test_a_reported_context_leaves_only_the_prompt_assumption() -> None:
    window = ServingWindow(interval_seconds=1, prefill_tokens=10, decode_tokens=10, batch_size=2, context_tokens=64)
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=None
    )
    assert result.assumptions == (
        "prefill attention span taken as the decode context: the report sent no prompt_tokens",
    )
    assert result.phases["prefill"].context_tokens == 64


def test_without_any_context_nothing_is_assumed_and_attention_is_left_out() -> None:
    window = ServingWindow(interval_seconds=1, prefill_tokens=10, decode_tokens=10, batch_size=2)
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=2.0**40
    )
    assert result.assumptions == ()
    assert result.phases["prefill"].flops_per_token == 2**31
    assert result.phases["decode"].flops_per_token == 2**31
    assert result.mbu_reason == "context length unknown: report context_tokens or model.seq_len"


@pytest.mark.parametrize(("prompt_tokens", "attention_span"), [(0.4, 1), (1, 1), (2.6, 3)])
def test_a_phase_context_is_rounded_to_at_least_one_token(prompt_tokens: float, attention_span: int) -> None:
    window = ServingWindow(
        interval_seconds=1, prefill_tokens=1, decode_tokens=0, context_tokens=8, prompt_tokens=prompt_tokens
    )
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=None
    )
    assert result.phases["prefill"].flops_per_token == 2**31 + 2048 * attention_span


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        (
            ModelShape(flops_per_token=1e9),
            "model.params (or flops_per_token only) unknown: MBU needs the parameter count",
        ),
        (
            ModelShape(params=1e9, heads=8, head_dim=16),
            "the KV cache size needs model.layers, model.heads (or kv_heads) and model.head_dim",
        ),
        (
            ModelShape(params=1e9, layers=4, heads=8),
            "the KV cache size needs model.layers, model.heads (or kv_heads) and model.head_dim",
        ),
        (
            ModelShape(params=1e9, layers=4, head_dim=16),
            "the KV cache size needs model.layers, model.heads (or kv_heads) and model.head_dim",
        ),
    ],
)
def test_why_mbu_is_missing(shape: ModelShape, reason: str) -> None:
    window = ServingWindow(interval_seconds=1, prefill_tokens=0, decode_tokens=1, batch_size=1, context_tokens=1)
    result = evaluate_serving(
        shape=shape, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=2.0**40
    )
    assert (result.mbu, result.mbu_reason) == (None, reason)


def test_why_mbu_is_missing_without_batch_or_bandwidth() -> None:
    window = ServingWindow(interval_seconds=1, prefill_tokens=0, decode_tokens=1, context_tokens=1)
    no_batch = evaluate_serving(
        shape=SMALL, window=window, num_gpus=1, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=2.0**40
    )
    assert no_batch.mbu_reason == (
        "batch_size unknown: report batch_size (mean sequences per decode step) or requests_running"
    )
    arguments: dict[str, Any] = {"shape": SMALL, "window": WINDOW, "num_gpus": 1, "peak_flops_per_gpu": None}
    no_bandwidth = evaluate_serving(**arguments, peak_bandwidth_per_gpu=None)
    assert no_bandwidth.mbu_reason == "peak memory bandwidth unknown: send peak_memory_bandwidth_per_gpu"
    assert no_bandwidth.peak_memory_bytes_per_second is None
    looked_up = evaluate_serving(**arguments, peak_bandwidth_per_gpu=None, bandwidth_reason="no figure for x")
    assert looked_up.mbu_reason == "no figure for x"


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        (ModelShape(params=1e9, heads=8, head_dim=16), None),
        (ModelShape(params=1e9, layers=4, heads=8), None),
        (ModelShape(params=1e9, layers=4, head_dim=16), None),
        (ModelShape(params=1e9, layers=4, head_dim=16, kv_heads=2), 512),
    ],
)
def test_kv_cache_bytes_need_the_whole_shape(shape: ModelShape, expected: float | None) -> None:
    assert kv_cache_bytes_per_token(shape, "bf16") == expected


def test_weight_bytes_need_params() -> None:
    assert weight_bytes(ModelShape(flops_per_token=1e9), "bf16") is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("interval_seconds", 0.0, "interval_seconds must be a finite number > 0, got 0.0"),
        ("interval_seconds", math.nan, "interval_seconds must be a finite number > 0, got nan"),
        ("prefill_tokens", -1.0, "prefill_tokens must be a finite number >= 0, got -1.0"),
        ("decode_tokens", -1.0, "decode_tokens must be a finite number >= 0, got -1.0"),
        ("decode_tokens", math.nan, "decode_tokens must be a finite number >= 0, got nan"),
        ("prefill_seconds", -0.5, "prefill_seconds must be a finite number >= 0, got -0.5"),
        ("decode_seconds", math.inf, "decode_seconds must be a finite number >= 0, got inf"),
        ("batch_size", 0.0, "batch_size must be a finite number > 0, got 0.0"),
        ("context_tokens", 0.0, "context_tokens must be a finite number > 0, got 0.0"),
        ("prompt_tokens", -3.0, "prompt_tokens must be a finite number > 0, got -3.0"),
        ("engine_flops_per_gpu", -1.0, "engine_flops_per_gpu must be a finite number >= 0, got -1.0"),
        ("engine_bytes_per_gpu", math.nan, "engine_bytes_per_gpu must be a finite number >= 0, got nan"),
    ],
)
def test_serving_window_refuses_bad_inputs(field: str, value: float, message: str) -> None:
    arguments: dict[str, Any] = {"interval_seconds": 1.0, "prefill_tokens": 1.0, "decode_tokens": 1.0, field: value}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ServingWindow(**arguments)


def test_serving_window_accepts_zeros_where_zero_is_meaningful() -> None:
    window = ServingWindow(
        interval_seconds=0.5, prefill_tokens=0, decode_tokens=0, prefill_seconds=0, decode_seconds=0, batch_size=0.1
    )
    assert window.tokens_per_second == 0.0


def test_compute_mbu_boundaries() -> None:
    assert compute_mbu(0.0, 1, 1.0) == 0.0
    assert compute_mbu(0.5, 1, 0.5) == 1.0
    for args, message in [
        ((-1.0, 1, 1.0), "bytes_per_second must be a finite number >= 0, got -1.0"),
        ((math.nan, 1, 1.0), "bytes_per_second must be a finite number >= 0, got nan"),
        ((1.0, 0, 1.0), "num_gpus must be an integer >= 1, got 0"),
        ((1.0, 1, 0.0), "peak_bandwidth_per_gpu must be a finite number > 0, got 0.0"),
        ((1.0, 1, math.inf), "peak_bandwidth_per_gpu must be a finite number > 0, got inf"),
    ]:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            compute_mbu(*args)  # type: ignore[arg-type]


# --- the engine's own estimate (vLLM/SGLang --enable-mfu-metrics), beside ours ---


def test_the_engine_estimate_over_the_same_peaks_by_hand() -> None:
    # 2 GPUs, 4 s. The engine says one GPU did 2^43 FLOPs and moved 2^39 bytes in the interval:
    # per GPU 2^41 FLOP/s / 2^42 peak = 0.5;  2^37 bytes/s / 2^38 peak = 0.5
    # whole job: 2^41 x 2 = 2^42 FLOP/s;       2^37 x 2 = 2^38 bytes/s
    window = replace(WINDOW, engine_flops_per_gpu=2.0**43, engine_bytes_per_gpu=2.0**39)
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, peak_bandwidth_per_gpu=PEAK_BANDWIDTH
    )
    assert result.engine is not None
    assert result.engine.flops_per_second == 2.0**42
    assert result.engine.mfu == 0.5
    assert result.engine.memory_bytes_per_second == 2.0**38
    assert result.engine.mbu == 0.5
    assert result.mfu == 0.375244140625  # ours is unchanged by theirs
    document = result.as_json(SMALL)
    assert (document["engine_mfu"], document["engine_mbu"]) == (0.5, 0.5)
    assert document["engine_flops_per_second"] == 2.0**42
    assert document["engine_memory_bytes_per_second"] == 2.0**38


def test_an_engine_at_exactly_the_peak_is_shown() -> None:
    # 2^42 FLOPs and 2^38 bytes per GPU per second: exactly one peak each, which a share of 1 shows
    window = replace(WINDOW, engine_flops_per_gpu=2.0**44, engine_bytes_per_gpu=2.0**40)
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, peak_bandwidth_per_gpu=PEAK_BANDWIDTH
    )
    assert result.engine is not None
    assert (result.engine.mfu, result.engine.mbu) == (1.0, 1.0)


def test_an_engine_that_exports_only_bytes_has_no_flops() -> None:
    window = replace(WINDOW, engine_bytes_per_gpu=2.0**39)
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, peak_bandwidth_per_gpu=PEAK_BANDWIDTH
    )
    assert result.engine is not None
    assert (result.engine.flops_per_second, result.engine.mfu) == (None, None)
    assert (result.engine.memory_bytes_per_second, result.engine.mbu) == (2.0**38, 0.5)


def test_engine_mfu_and_ours_share_one_denominator() -> None:
    # Through evaluate and the peak table: engine MFU / our MFU is engine FLOP/s / our FLOP/s.
    engine_flops_per_gpu = 0.25 * H100_SXM_BF16 * 10  # a quarter of the peak for 10 s
    window = ServingWindow(
        interval_seconds=10,
        prefill_tokens=0,
        decode_tokens=20_000,
        batch_size=32,
        context_tokens=2048,
        engine_flops_per_gpu=engine_flops_per_gpu,
    )
    result = evaluate(
        kind="inference",
        shape=LLAMA_70B,
        tokens_per_second=window.tokens_per_second,
        num_gpus=8,
        device_name="NVIDIA H100 80GB HBM3",
        serving=window,
    )
    assert result.serving is not None and result.serving.engine is not None and result.mfu is not None
    engine = result.serving.engine
    assert engine.mfu == pytest.approx(0.25)
    assert engine.mfu / result.mfu == pytest.approx(engine.flops_per_second / result.model_flops_per_second)
    assert engine.mbu is None and engine.memory_bytes_per_second is None  # no bytes sent


def test_an_engine_ratio_above_one_is_not_shown_but_its_flops_are() -> None:
    window = replace(WINDOW, engine_flops_per_gpu=2.0**45, engine_bytes_per_gpu=2.0**41)  # 4x both peaks
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, peak_bandwidth_per_gpu=PEAK_BANDWIDTH
    )
    assert result.engine is not None
    assert result.engine.mfu is None and result.engine.mbu is None
    assert result.engine.flops_per_second == 2.0**44


def test_an_engine_estimate_without_a_peak_keeps_its_flops() -> None:
    window = replace(WINDOW, engine_flops_per_gpu=2.0**43)
    result = evaluate_serving(
        shape=SMALL, window=window, num_gpus=2, peak_flops_per_gpu=None, peak_bandwidth_per_gpu=None
    )
    assert result.engine is not None
    assert (result.engine.flops_per_second, result.engine.mfu) == (2.0**42, None)


def test_no_engine_estimate_without_its_counters() -> None:
    result = evaluate_serving(
        shape=SMALL, window=WINDOW, num_gpus=2, peak_flops_per_gpu=PEAK_FLOPS, peak_bandwidth_per_gpu=PEAK_BANDWIDTH
    )
    assert result.engine is None
