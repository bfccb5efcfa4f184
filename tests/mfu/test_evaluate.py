"""`evaluate`: one job report in, MFU/HFU and the figures behind them out."""

from __future__ import annotations

import re

import pytest

from mfumon.mfu import MfuResult, ModelShape, ServingWindow, compute_mfu, evaluate

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


# -- boundaries (issue 36): each test sits where a plausible mutation of the engine would change the result -----

EXACT_PEAK = ModelShape(flops_per_token=989e9)  # 1,000 tokens/s of it is exactly one H100's dense bf16 peak


def test_mfu_of_exactly_one_is_plausible_and_so_is_hfu() -> None:
    # Inference recomputes nothing, so HFU = MFU = 989e9 x 1e3 / 989e12 = 1.0: at the limit, not past it.
    result = evaluate(
        kind="inference",
        shape=EXACT_PEAK,
        tokens_per_second=1e3,
        num_gpus=1,
        device_name=H100,
        recompute_activations=True,
    )
    assert (result.mfu, result.hfu, result.reason) == (1.0, 1.0, None)
    assert result.hardware_flops_per_token == 989e9


def test_mfu_just_above_one_is_implausible_and_takes_hfu_with_it() -> None:
    # 1,010 tokens/s x 989e9 = 1.01 x the peak.
    result = evaluate(
        kind="training",
        shape=EXACT_PEAK,
        tokens_per_second=1010,
        num_gpus=1,
        device_name=H100,
        recompute_activations=True,
    )
    assert result == MfuResult(
        mfu=None,
        hfu=None,
        reason="implausible MFU 1.01 > 1: the throughput, FLOPs per token or device peak is wrong",
        flops_per_token=989e9,
        hardware_flops_per_token=989e9 * (8 / 6),
        model_flops_per_second=1010 * 989e9,
        peak_flops_per_second=989e12,
        peak_flops_per_gpu=989e12,
        device_key="h100-sxm",
        dtype="bf16",
        mig_fraction=1.0,
    )


def test_an_unresolved_result_keeps_dtype_and_model_flops() -> None:
    result = evaluate(
        kind="training",
        shape=ModelShape(params=1e9),
        tokens_per_second=100,
        num_gpus=2,
        device_name="Acme Matrix Engine 9000",
        dtype="fp16",
    )
    assert result == MfuResult(
        mfu=None,
        hfu=None,
        reason="unknown device 'Acme Matrix Engine 9000': not in the peak table; send peak_flops_per_gpu or add "
        "the device to the peak override file",
        flops_per_token=6e9,
        hardware_flops_per_token=None,
        model_flops_per_second=6e11,
        peak_flops_per_second=None,
        peak_flops_per_gpu=None,
        device_key=None,
        dtype="fp16",
        mig_fraction=None,
    )


def test_a_figure_without_a_primary_source_is_flagged_unconfirmed() -> None:
    # The A10G's bf16 peak (125e12) is disputed; 100 tokens/s x 6e9 = 6e11 FLOP/s over 2 x 125e12.
    result = evaluate(
        kind="training", shape=ModelShape(params=1e9), tokens_per_second=100, num_gpus=2, device_name="NVIDIA A10G"
    )
    assert (result.mfu, result.peak_unconfirmed, result.device_key) == (6e11 / 250e12, True, "a10g")
    h100 = evaluate(kind="training", shape=ModelShape(params=1e9), tokens_per_second=100, num_gpus=2, device_name=H100)
    assert h100.peak_unconfirmed is False


def test_mig_profile_given_apart_from_the_device_name() -> None:
    result = evaluate(
        kind="training",
        shape=ModelShape(params=1e9),
        tokens_per_second=100,
        num_gpus=2,
        device_name="NVIDIA A100-SXM4-40GB",
        mig_profile="1g.5gb",
    )
    assert (result.mig_fraction, result.peak_flops_per_gpu) == (1 / 7, 312e12 * (1 / 7))


def test_peak_override_is_used_as_given_on_a_mig_slice() -> None:
    # No MIG scaling of an override: the job measured its own slice. An int override comes back a float.
    result = evaluate(
        kind="training",
        shape=ModelShape(params=1e9),
        tokens_per_second=100,
        num_gpus=2,
        device_name="NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        mig_profile="2g.10gb",
        peak_flops_per_gpu=400 * 10**12,
    )
    assert result == MfuResult(
        mfu=6e11 / 800e12,
        hfu=None,
        reason=None,
        flops_per_token=6e9,
        hardware_flops_per_token=None,
        model_flops_per_second=6e11,
        peak_flops_per_second=800e12,
        peak_flops_per_gpu=400e12,
        device_key="a100-sxm-40gb",
        dtype="bf16",
        mig_fraction=1.0,
    )
    assert type(result.peak_flops_per_gpu) is float


def test_peak_override_without_a_device_name() -> None:
    result = evaluate(
        kind="training", shape=ModelShape(params=1e9), tokens_per_second=100, num_gpus=1, peak_flops_per_gpu=6e12
    )
    assert (result.mfu, result.device_key, result.reason) == (0.1, None, None)


_UNKNOWN = "Acme Matrix Engine 9000"


@pytest.mark.parametrize("device_name", [H100, _UNKNOWN, None])
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_gpus": 0}, "num_gpus must be an integer >= 1, got 0"),
        ({"num_gpus": True}, "num_gpus must be an integer >= 1, got True"),
        ({"num_gpus": 2.0}, "num_gpus must be an integer >= 1, got 2.0"),
        ({"tokens_per_second": -5.0}, "tokens_per_second must be a finite number >= 0, got -5.0"),
        ({"tokens_per_second": float("nan")}, "tokens_per_second must be a finite number >= 0, got nan"),
        ({"dtype": "int4"}, "dtype must be one of bf16, fp16, fp8, tf32, fp32, fp4, int8; got 'int4'"),
        ({"peak_flops_per_gpu": 0.0}, "peak_flops_per_gpu must be a finite number > 0, got 0.0"),
        (
            {"peak_memory_bandwidth_per_gpu": 0.0},
            "peak_memory_bandwidth_per_gpu must be a finite number > 0, got 0.0",
        ),
        (
            {"serving": ServingWindow(interval_seconds=1, prefill_tokens=1, decode_tokens=1)},
            "prefill_tokens and decode_tokens describe inference jobs; this job's kind is training",
        ),
        ({"shape": ModelShape(layers=2)}, "model needs params (or active_params) or an explicit flops_per_token"),
    ],
)
def test_contract_violations_raise_whatever_the_device(
    device_name: str | None, overrides: dict[str, object], message: str
) -> None:
    # One check per input, before any lookup: an unknown device does not turn a broken report into mfu=None.
    arguments: dict[str, object] = {
        "kind": "training",
        "shape": DENSE_7B,
        "tokens_per_second": 1e3,
        "num_gpus": 1,
        "device_name": device_name,
    }
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        evaluate(**{**arguments, **overrides})  # type: ignore[arg-type]


def test_compute_mfu_boundaries() -> None:
    assert compute_mfu(0.0, 2.0, 1, 4.0) == 0.0  # an idle job: MFU 0, not an error
    assert compute_mfu(0.5, 0.5, 1, 0.5) == 0.5  # values below 1 are valid inputs
    assert compute_mfu(3.0, 4.0, 2, 6.0) == 1.0
    for args, message in [
        ((-1.0, 1.0, 1, 1.0), "tokens_per_second must be a finite number >= 0, got -1.0"),
        ((1.0, 0.0, 1, 1.0), "flops_per_token must be a finite number > 0, got 0.0"),
        ((1.0, 1.0, 0, 1.0), "num_gpus must be an integer >= 1, got 0"),
        ((1.0, 1.0, 1, 0.0), "peak_flops_per_gpu must be a finite number > 0, got 0.0"),
    ]:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            compute_mfu(*args)  # type: ignore[arg-type]
