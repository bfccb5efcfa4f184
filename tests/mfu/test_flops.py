"""FLOPs-per-token formulas (PaLM App. B), hand-computed: dense, MoE, inference, override, HFU."""

from __future__ import annotations

import re

import pytest

from mfumon.mfu import ModelShape, flops_per_token, hardware_flops_per_token

# Llama-2-7B-like shape: L=32, H=32, Q=128, T=4096 → L·H·Q·T = 536_870_912.
LLAMA_7B = ModelShape(params=6.74e9, layers=32, heads=32, head_dim=128, seq_len=4096)


def test_training_dense_is_6n_plus_12lhqt() -> None:
    # 6 * 6.74e9 = 40.44e9; 12 * 536_870_912 = 6_442_450_944.
    assert flops_per_token(LLAMA_7B, "training") == pytest.approx(40.44e9 + 6_442_450_944, rel=1e-12)


def test_inference_dense_is_2n_plus_4lhqt() -> None:
    # 2 * 6.74e9 = 13.48e9; 4 * 536_870_912 = 2_147_483_648.
    assert flops_per_token(LLAMA_7B, "inference") == pytest.approx(13.48e9 + 2_147_483_648, rel=1e-12)


def test_moe_counts_active_params_only() -> None:
    # Mixtral-8x7B-like: 46.7B total, 12.9B active. 6 * 12.9e9 = 77.4e9; 12 * 32·32·128·4096 = 6_442_450_944.
    moe = ModelShape(params=46.7e9, active_params=12.9e9, layers=32, heads=32, head_dim=128, seq_len=4096)
    assert flops_per_token(moe, "training") == pytest.approx(77.4e9 + 6_442_450_944, rel=1e-12)
    # Inference: 2 * 12.9e9 = 25.8e9; 4 * 536_870_912 = 2_147_483_648.
    assert flops_per_token(moe, "inference") == pytest.approx(25.8e9 + 2_147_483_648, rel=1e-12)


def test_active_params_alone_are_enough() -> None:
    assert flops_per_token(ModelShape(active_params=1e9)) == pytest.approx(6e9)


def test_attention_term_needs_all_four_dimensions() -> None:
    partial = ModelShape(params=1e9, layers=32, heads=32, head_dim=128)  # no seq_len
    assert flops_per_token(partial, "training") == pytest.approx(6e9)
    assert flops_per_token(partial, "inference") == pytest.approx(2e9)


def test_explicit_flops_per_token_overrides_shape_for_both_kinds() -> None:
    shape = ModelShape(params=7e9, layers=32, heads=32, head_dim=128, seq_len=4096, flops_per_token=5.5e10)
    assert flops_per_token(shape, "training") == 5.5e10
    assert flops_per_token(shape, "inference") == 5.5e10
    assert flops_per_token(ModelShape(flops_per_token=3e9)) == 3e9


def test_hfu_full_recompute_adds_one_forward_pass_in_training() -> None:
    model_flops = flops_per_token(LLAMA_7B, "training")
    # 4·2 instead of 3·2 FLOPs per parameter (PaLM App. B).
    assert hardware_flops_per_token(LLAMA_7B, "training", True) == pytest.approx(model_flops * 8 / 6)
    assert hardware_flops_per_token(LLAMA_7B, "training", False) == model_flops


def test_hfu_inference_has_nothing_to_recompute() -> None:
    assert hardware_flops_per_token(LLAMA_7B, "inference", True) == flops_per_token(LLAMA_7B, "inference")


def test_no_params_and_no_override_is_an_error() -> None:
    with pytest.raises(ValueError, match="params"):
        flops_per_token(ModelShape(layers=32, heads=32, head_dim=128, seq_len=4096))


def test_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="kind"):
        flops_per_token(LLAMA_7B, "finetune")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"params": 0}, "model.params"),
        ({"params": -1e9}, "model.params"),
        ({"layers": 0, "params": 1e9}, "model.layers"),
        ({"flops_per_token": float("nan")}, "model.flops_per_token"),
        ({"params": 1e9, "active_params": 2e9}, "active_params"),
    ],
)
def test_shape_rejects_impossible_values(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelShape(**fields)  # type: ignore[arg-type]


# -- boundaries (issue 36) ----------------------------------------------------------------------------------------


def test_the_defaults_are_training_without_recompute() -> None:
    assert hardware_flops_per_token(ModelShape(params=1e9)) == 6e9


def test_unknown_kind_message() -> None:
    with pytest.raises(ValueError, match=r"^kind must be one of training, inference; got 'serving'$"):
        flops_per_token(ModelShape(params=1e9), "serving")  # type: ignore[arg-type]


def test_as_many_kv_heads_as_heads_and_all_params_active_are_valid() -> None:
    shape = ModelShape(params=1e9, active_params=1e9, heads=8, kv_heads=8)
    assert flops_per_token(shape) == 6e9


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"params": 1e9, "active_params": 2e9}, "model.active_params (2e+09) exceeds model.params (1e+09)"),
        ({"heads": 8, "kv_heads": 9}, "model.kv_heads (9) exceeds model.heads (8)"),
        ({"kv_heads": 0}, "model.kv_heads must be a finite number > 0, got 0"),
    ],
)
def test_shape_messages(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ModelShape(**fields)  # type: ignore[arg-type]


def test_kv_heads_without_heads_is_accepted() -> None:
    assert ModelShape(params=1e9, kv_heads=64).kv_heads == 64
