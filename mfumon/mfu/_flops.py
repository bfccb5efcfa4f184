"""Model FLOPs per token: the numerator of MFU.

The formula is PaLM's (Chowdhery et al. 2022, arXiv 2204.02311, Appendix B), the same one nanoGPT and
torchtitan use:

    training   FLOPs/token = 6·N + 12·L·H·Q·T
    inference  FLOPs/token = 2·N +  4·L·H·Q·T

N counts the parameters that take part in a matmul for each token (for a MoE, the *active* parameters),
L = layers, H = attention (query) heads, Q = head dimension, T = sequence (context) length. 6 = 3 (forward, backward
for activations, backward for weights) x 2 (multiply + add); inference runs the forward pass only, hence 2 and
the attention term ÷ 3. No /2 for the causal mask (PaLM convention; Megatron-LM has applied it since 2025-03).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal, get_args

WorkloadKind = Literal["training", "inference"]
KINDS: tuple[WorkloadKind, ...] = get_args(WorkloadKind)

# FLOPs per parameter per token, and the multiplier of L·H·Q·T for the attention matmuls (QKᵀ and AV).
_PARAM_FLOPS_FACTOR: dict[str, int] = {"training": 6, "inference": 2}
_ATTENTION_FLOPS_FACTOR: dict[str, int] = {"training": 12, "inference": 4}

# Full activation recompute runs the forward pass twice: 4·2 instead of 3·2 FLOPs per parameter
# (PaLM App. B "hardware FLOPs utilization"; stas00/ml-engineering "MFU vs HFU").
_FULL_RECOMPUTE_TRAINING_FACTOR = 8 / 6


@dataclass(frozen=True)
class ModelShape:
    """What a job tells us about its model; every field is optional, but FLOPs need params or an override.

    `flops_per_token` is an explicit count (e.g. from Megatron's or torchtitan's own formula) and wins over
    the shape. The attention term is added only when all of layers, heads, head_dim and seq_len are known.
    `kv_heads` (grouped-query attention; 1 for MQA) does not change FLOPs, only the KV cache's size (MBU).
    """

    params: float | None = None
    active_params: float | None = None
    layers: int | None = None
    heads: int | None = None
    head_dim: int | None = None
    seq_len: int | None = None
    flops_per_token: float | None = None
    kv_heads: int | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"model.{field.name} must be a finite number > 0, got {value!r}")
        if self.params is not None and self.active_params is not None and self.active_params > self.params:
            raise ValueError(f"model.active_params ({self.active_params:g}) exceeds model.params ({self.params:g})")
        if self.heads is not None and self.kv_heads is not None and self.kv_heads > self.heads:
            raise ValueError(f"model.kv_heads ({self.kv_heads}) exceeds model.heads ({self.heads})")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")


def flops_per_token(shape: ModelShape, kind: WorkloadKind = "training") -> float:
    """Model FLOPs for one token (PaLM App. B); ValueError when neither params nor an override is given."""
    _check_kind(kind)
    if shape.flops_per_token is not None:
        return float(shape.flops_per_token)
    matmul_params = shape.active_params if shape.active_params is not None else shape.params
    if matmul_params is None:
        raise ValueError("model needs params (or active_params) or an explicit flops_per_token")
    param_flops_per_token = _PARAM_FLOPS_FACTOR[kind] * matmul_params
    attention_flops_per_token = _ATTENTION_FLOPS_FACTOR[kind] * _attention_product(shape)
    return float(param_flops_per_token + attention_flops_per_token)


def hardware_flops_per_token(
    shape: ModelShape, kind: WorkloadKind = "training", recompute_activations: bool = False
) -> float:
    """FLOPs actually executed per token (the HFU numerator): model FLOPs plus activation recompute.

    Only full activation recompute is modelled (one extra forward pass, x 8/6 in training, PaLM App. B);
    inference has no backward pass, so nothing is recomputed. Flash-attention's backward recompute is ignored.
    """
    model_flops = flops_per_token(shape, kind)
    if kind == "training" and recompute_activations:
        return model_flops * _FULL_RECOMPUTE_TRAINING_FACTOR
    return model_flops


def _attention_product(shape: ModelShape) -> int:
    """L·H·Q·T, or 0 when any factor is unknown (then the attention term is left out)."""
    factors = (shape.layers, shape.heads, shape.head_dim, shape.seq_len)
    if any(factor is None for factor in factors):
        return 0
    layers, heads, head_dim, seq_len = (int(factor) for factor in factors)  # type: ignore[arg-type]
    return layers * heads * head_dim * seq_len
