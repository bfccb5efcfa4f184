"""`evaluate`: one job report in, MFU/HFU and the figures behind them out."""

from __future__ import annotations

import pytest

from mfumon.mfu import ModelShape, evaluate

DENSE_7B = ModelShape(params=7e9)  # 6 * 7e9 = 42e9 training FLOPs per token, 14e9 for inference
H100 = "NVIDIA H100 80GB HBM3"


def test_training_job_on_h100() -> None:
    # 3e4 tokens/s * 42e9 FLOPs = 1.26e15 FLOP/s; 8 * 989e12 = 7.912e15 FLOP/s of peak.
    result = evaluate(kind="training", shape=DENSE_7B, tokens_per_second=3e4, num_gpus=8, device_name=H100)
    assert result.flops_per_token == 42e9
    assert result.model_flops_per_second == pytest.approx(1.26e15)
    assert result.peak_flops_per_gpu == 989e12
    assert result.peak_flops_per_second == pytest.approx(7.912e15)
    assert result.mfu == pytest.approx(1.26e15 / 7.912e15)
    assert result.device_key == "h100-sxm"
    assert result.reason is None


def test_inference_job_uses_the_forward_formula() -> None:
    # 1e4 tokens/s * 14e9 FLOPs = 1.4e14 FLOP/s over 2 * 362e12 (L40S bf16).
    result = evaluate(kind="inference", shape=DENSE_7B, tokens_per_second=1e4, num_gpus=2, device_name="NVIDIA L40S")
    assert result.flops_per_token == 14e9
    assert result.mfu == pytest.approx(1.4e14 / 724e12)


def test_moe_job_divides_active_flops() -> None:
    moe = ModelShape(params=46.7e9, active_params=12.9e9)
    # 1e4 tokens/s * 6 * 12.9e9 = 7.74e14 FLOP/s over 8 * 312e12.
    result = evaluate(
        kind="training", shape=moe, tokens_per_second=1e4, num_gpus=8, device_name="NVIDIA A100-SXM4-80GB"
    )
    assert result.mfu == pytest.approx(7.74e14 / (8 * 312e12))


def test_mig_slice_job() -> None:
    # 200 tokens/s * 6e9 = 1.2e12 FLOP/s on one 1g slice of an A100 (312e12 / 7).
    result = evaluate(
        kind="training",
        shape=ModelShape(params=1e9),
        tokens_per_second=200,
        num_gpus=1,
        device_name="NVIDIA A100-SXM4-40GB MIG 1g.5gb",
    )
    assert result.mig_fraction == pytest.approx(1 / 7)
    assert result.peak_flops_per_gpu == pytest.approx(312e12 / 7)
    assert result.mfu == pytest.approx(1.2e12 * 7 / 312e12)


@pytest.mark.parametrize(("recompute", "ratio"), [(True, 8 / 6), (False, 1.0)])
def test_hfu_over_mfu_is_the_recompute_factor(recompute: bool, ratio: float) -> None:
    result = evaluate(
        kind="training",
        shape=DENSE_7B,
        tokens_per_second=3e4,
        num_gpus=8,
        device_name=H100,
        recompute_activations=recompute,
    )
    assert result.mfu is not None
    assert result.hfu is not None
    assert result.hfu / result.mfu == pytest.approx(ratio)
    assert result.hardware_flops_per_token == pytest.approx(42e9 * ratio)


def test_hfu_unknown_when_recompute_unknown() -> None:
    result = evaluate(kind="training", shape=DENSE_7B, tokens_per_second=3e4, num_gpus=8, device_name=H100)
    assert result.mfu is not None
    assert result.hfu is None
    assert result.hardware_flops_per_token is None


def test_peak_override_serves_a_device_not_in_the_table() -> None:
    result = evaluate(
        kind="training",
        shape=DENSE_7B,
        tokens_per_second=1e3,
        num_gpus=4,
        device_name="Acme Matrix Engine 9000",
        peak_flops_per_gpu=100e12,
    )
    assert result.device_key is None
    assert result.peak_flops_per_second == pytest.approx(400e12)
    assert result.mfu == pytest.approx(42e12 / 400e12)


def test_peak_override_wins_over_the_table_but_keeps_the_device_key() -> None:
    result = evaluate(
        kind="training",
        shape=DENSE_7B,
        tokens_per_second=1e3,
        num_gpus=1,
        device_name=H100,
        peak_flops_per_gpu=500e12,
    )
    assert result.device_key == "h100-sxm"
    assert result.peak_flops_per_gpu == 500e12


def test_unknown_device_without_override_keeps_the_model_flops() -> None:
    result = evaluate(
        kind="training",
        shape=DENSE_7B,
        tokens_per_second=1e3,
        num_gpus=1,
        device_name="NVIDIA GeForce GT 710",
    )
    assert result.mfu is None
    assert result.hfu is None
    assert result.peak_flops_per_second is None
    assert result.reason is not None
    assert "unknown device" in result.reason
    assert result.model_flops_per_second == pytest.approx(42e12)


def test_no_device_and_no_override() -> None:
    result = evaluate(kind="training", shape=DENSE_7B, tokens_per_second=1e3, num_gpus=1)
    assert result.mfu is None
    assert result.reason is not None
    assert "no device model" in result.reason


def test_fp8_on_a100_has_no_peak() -> None:
    result = evaluate(
        kind="training",
        shape=DENSE_7B,
        tokens_per_second=1e3,
        num_gpus=1,
        device_name="NVIDIA A100-SXM4-80GB",
        dtype="fp8",
    )
    assert result.mfu is None
    assert result.device_key == "a100-sxm-80gb"
    assert result.reason is not None
    assert "fp8" in result.reason


def test_fp8_on_h100_divides_by_the_fp8_peak() -> None:
    result = evaluate(kind="training", shape=DENSE_7B, tokens_per_second=1e3, num_gpus=1, device_name=H100, dtype="fp8")
    assert result.peak_flops_per_gpu == 1979e12


def test_mfu_above_one_is_rejected_with_the_value() -> None:
    # 1e6 tokens/s * 42e9 = 4.2e16 FLOP/s on one 989e12 GPU: 42x the peak, so the inputs are wrong.
    result = evaluate(kind="training", shape=DENSE_7B, tokens_per_second=1e6, num_gpus=1, device_name=H100)
    assert result.mfu is None
    assert result.reason is not None
    assert "implausible MFU 42.5" in result.reason
    assert result.peak_flops_per_second == 989e12


def test_hfu_above_one_drops_only_hfu() -> None:
    # MFU 0.9, HFU 1.2 with recompute claimed.
    tokens_per_second = 0.9 * 989e12 / 42e9
    result = evaluate(
        kind="training",
        shape=DENSE_7B,
        tokens_per_second=tokens_per_second,
        num_gpus=1,
        device_name=H100,
        recompute_activations=True,
    )
    assert result.mfu == pytest.approx(0.9)
    assert result.hfu is None
    assert result.reason is not None
    assert "HFU" in result.reason


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_gpus": 0}, "num_gpus"),
        ({"tokens_per_second": -5.0}, "tokens_per_second"),
        ({"dtype": "int4"}, "dtype"),
        ({"peak_flops_per_gpu": 0.0}, "peak_flops_per_gpu"),
        ({"shape": ModelShape(layers=2)}, "params"),
    ],
)
def test_contract_violations_raise(overrides: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "kind": "training",
        "shape": DENSE_7B,
        "tokens_per_second": 1e3,
        "num_gpus": 1,
        "device_name": H100,
    }
    with pytest.raises(ValueError, match=message):
        evaluate(**{**arguments, **overrides})  # type: ignore[arg-type]
