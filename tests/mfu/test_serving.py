"""MBU and MFU by phase, checked against figures computed by hand (each test shows the arithmetic)."""

from __future__ import annotations

import pytest

from mfumon.mfu import (
    FORMULAS,
    ModelShape,
    PeakTable,
    ServingWindow,
    compute_mbu,
    decode_step_bytes,
    evaluate,
    evaluate_serving,
    kv_cache_bytes_per_token,
    weight_bytes,
)

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
