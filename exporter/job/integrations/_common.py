"""Helpers shared by the framework callbacks: find the token ids in a batch, map precisions to dtypes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Keys under which batches usually carry token ids, most specific first.
_TOKEN_KEYS = ("input_ids", "tokens", "idx", "x")


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "numel") and hasattr(value, "dtype")


def _is_integer(tensor: Any) -> bool:
    return not getattr(tensor.dtype, "is_floating_point", True) and not getattr(tensor.dtype, "is_complex", False)


def find_token_tensor(batch: Any) -> Any:
    """The tensor of token ids in a batch (a tensor, a mapping or a sequence of them), or None."""
    if _is_tensor(batch):
        return batch if _is_integer(batch) else None
    if isinstance(batch, Mapping):
        for key in _TOKEN_KEYS:
            value = batch.get(key)
            if _is_tensor(value) and _is_integer(value):
                return value
        candidates: Any = batch.values()
    elif isinstance(batch, (list, tuple)):
        candidates = batch
    else:
        return None
    for value in candidates:
        if _is_tensor(value) and _is_integer(value) and len(value.shape) >= 1:
            return value
    return None


def tokens_in(tensor: Any) -> int:
    """Token positions in a ``(batch, seq)`` tensor of ids (padding included, as MFU conventions do)."""
    return int(tensor.numel())


def seq_len_of(tensor: Any) -> int | None:
    """The sequence length of a ``(batch, seq)`` id tensor."""
    return int(tensor.shape[-1]) if len(tensor.shape) >= 2 else None


def dtype_from_precision(precision: str | None) -> str | None:
    """Map a Lightning/Accelerate precision setting to the report's dtype (None when it says nothing)."""
    if not precision:
        return None
    value = str(precision).lower()
    if "bf16" in value:
        return "bf16"
    if "transformer-engine" in value or "fp8" in value:
        return "fp8"
    if value.startswith("16") or "fp16" in value:
        return "fp16"
    if value.startswith("32"):
        return _fp32_or_tf32()
    return None


def dtype_of_module(module: Any) -> str | None:
    """The report dtype of a module's first floating-point parameter (pure bf16/fp16/fp32 training)."""
    for param in module.parameters():
        name = str(param.dtype)
        if "bfloat16" in name:
            return "bf16"
        if "float16" in name:
            return "fp16"
        if "float32" in name:
            return _fp32_or_tf32()
    return None


def _fp32_or_tf32() -> str:
    """fp32 matmuls run as TF32 unless the matmul precision is "highest" (Lightning's rule too)."""
    import torch

    return "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"
