"""The engine against published results, each recomputed with its authors' own formula."""

from __future__ import annotations

import pytest

from mfumon.mfu import ModelShape, compute_mfu, evaluate, flops_per_token


def test_palm_540b_reports_46_2_percent_mfu() -> None:
    # Chowdhery et al. 2022 (arXiv 2204.02311), App. B: 238.3K tokens/s on 6144 TPU v4 chips (275 TFLOP/s
    # bf16 each), N = 540.35B, L = 118, H = 48, Q = 256, T = 2048 → 46.2% MFU.
    palm = ModelShape(params=540.35e9, layers=118, heads=48, head_dim=256, seq_len=2048)
    result = evaluate(kind="training", shape=palm, tokens_per_second=238.3e3, num_gpus=6144, device_name="TPU v4")
    assert result.device_key == "tpu-v4"
    assert result.peak_flops_per_gpu == 275e12
    assert result.mfu is not None
    assert round(result.mfu, 3) == 0.462


def _nanogpt_estimate_mfu(
    n_params: int, n_layer: int, n_head: int, n_embd: int, block_size: int, fwdbwd_per_iter: int, dt: float
) -> float:
    """karpathy/nanoGPT model.py::estimate_mfu (3adf61e154c3), transcribed line by line."""
    N = n_params
    L, H, Q, T = n_layer, n_head, n_embd // n_head, block_size
    flops_per_token = 6 * N + 12 * L * H * Q * T
    flops_per_fwdbwd = flops_per_token * T
    flops_per_iter = flops_per_fwdbwd * fwdbwd_per_iter
    flops_achieved = flops_per_iter * (1.0 / dt)  # per second
    flops_promised = 312e12  # A100 GPU bfloat16 peak flops is 312 TFLOPS
    return flops_achieved / flops_promised


def test_nanogpt_gpt2_124m_matches_estimate_mfu() -> None:
    # GPT-2 124M: 124_439_808 params minus the 1024x768 position embedding = 123_653_376 (get_num_params).
    n_params = 123_653_376
    gpt2 = ModelShape(params=n_params, layers=12, heads=12, head_dim=64, seq_len=1024)
    # 6 * 123_653_376 = 741_920_256; 12 * 12·12·64·1024 = 113_246_208.
    assert flops_per_token(gpt2) == 855_166_464
    batch_size, grad_accum, dt_seconds = 12, 40, 4.2
    expected = _nanogpt_estimate_mfu(n_params, 12, 12, 768, 1024, batch_size * grad_accum, dt_seconds)
    tokens_per_second = batch_size * grad_accum * 1024 / dt_seconds
    result = evaluate(
        kind="training",
        shape=gpt2,
        tokens_per_second=tokens_per_second,
        num_gpus=1,
        device_name="NVIDIA A100-SXM4-40GB",
    )
    assert result.mfu == pytest.approx(expected, rel=1e-12)


def _megatron_flops_per_batch(
    batch: int, seq: int, layers: int, hidden: int, heads: int, groups: int, vocab: int
) -> float:
    """Megatron-LM num_floating_point_operations, first version (2748e7c7d4, non-gated 4h FFN)."""
    return (
        60
        * batch
        * seq
        * layers
        * hidden**2
        * (1 + groups / (5 * heads) + seq / (5 * hidden) + vocab / (10 * layers * hidden))
    )


def test_megatron_gpt3_175b_throughput_per_gpu_gives_the_same_mfu() -> None:
    # GPT-3 175B, MHA (query groups = heads). With N = 12·L·h² (attention + 4h MLP) + V·h (logits), PaLM's
    # 6N + 12·L·H·Q·T equals Megatron's formula; MFU = Megatron's TFLOP/s/GPU ÷ the A100 peak.
    layers, hidden, heads, seq, vocab = 96, 12288, 96, 2048, 51200
    batch, iteration_seconds, world_size = 1536, 38.5, 1024
    megatron_flops = _megatron_flops_per_batch(batch, seq, layers, hidden, heads, heads, vocab)
    throughput_tflops_per_gpu = megatron_flops / (iteration_seconds * 1e12 * world_size)
    megatron_mfu = throughput_tflops_per_gpu * 1e12 / 312e12
    gpt3 = ModelShape(
        params=12 * layers * hidden**2 + vocab * hidden,
        layers=layers,
        heads=heads,
        head_dim=hidden // heads,
        seq_len=seq,
    )
    assert flops_per_token(gpt3) == pytest.approx(megatron_flops / (batch * seq), rel=1e-12)
    tokens_per_second = batch * seq / iteration_seconds
    result = evaluate(
        kind="training",
        shape=gpt3,
        tokens_per_second=tokens_per_second,
        num_gpus=world_size,
        device_name="NVIDIA A100-SXM4-80GB",
    )
    assert result.mfu == pytest.approx(megatron_mfu, rel=1e-12)
    assert result.model_flops_per_second / world_size == pytest.approx(throughput_tflops_per_gpu * 1e12)


def test_compute_mfu_is_achieved_over_job_peak() -> None:
    # 1e5 tokens/s * 6e9 FLOPs/token = 6e14 FLOP/s over 4 * 989e12 = 3.956e15 FLOP/s.
    assert compute_mfu(1e5, 6e9, 4, 989e12) == pytest.approx(6e14 / 3.956e15, rel=1e-12)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((-1.0, 6e9, 1, 989e12), "tokens_per_second"),
        ((1e5, 0.0, 1, 989e12), "flops_per_token"),
        ((1e5, 6e9, 0, 989e12), "num_gpus"),
        ((1e5, 6e9, 1, 0.0), "peak_flops_per_gpu"),
        ((float("inf"), 6e9, 1, 989e12), "tokens_per_second"),
    ],
)
def test_compute_mfu_rejects_bad_inputs(arguments: tuple[float, float, int, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_mfu(*arguments)
