"""Model descriptors for job reports: size and shape from a HF config, a PyTorch module or plain numbers.

Example: ``from_hf_config("Llama-2-7b-hf/config.json", seq_len=4096).to_dict()`` gives
``{'params': 6738415616, 'layers': 32, 'heads': 32, 'head_dim': 128, 'seq_len': 4096, ...}``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mfumon.exporter.job.models._torch import count_parameters, from_module
from mfumon.exporter.modelspec import ModelSpec, from_hf_config, load_hf_config

__all__ = ["ModelSpec", "count_parameters", "describe_model", "from_hf_config", "from_module", "load_hf_config"]

_SPEC_KEYS = {
    "params",
    "active_params",
    "layers",
    "heads",
    "kv_heads",
    "head_dim",
    "seq_len",
    "flops_per_token",
    "name",
}


def describe_model(model: Any, *, seq_len: int | None = None) -> ModelSpec:
    """Turn whatever a job has at hand into a `ModelSpec`.

    Accepts a `ModelSpec`; a mapping of report fields (``{"params": 7e9, ...}``); a HF config as a mapping,
    ``PretrainedConfig``, config.json path or model folder; or a module with ``parameters()``.
    ``seq_len``, when given, fills in or replaces the sequence length.
    """
    spec = _describe(model, seq_len)
    if seq_len is not None and spec.seq_len != seq_len:
        spec = spec.replace(seq_len=seq_len)
    return spec


def _describe(model: Any, seq_len: int | None) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, Mapping) and set(model) <= _SPEC_KEYS:
        return ModelSpec(**dict(model))
    if isinstance(model, (Mapping, str, os.PathLike)):
        return from_hf_config(model, seq_len=seq_len)
    if hasattr(model, "parameters"):
        return from_module(model, seq_len=seq_len)
    if hasattr(model, "to_dict"):  # a transformers PretrainedConfig
        return from_hf_config(model, seq_len=seq_len)
    raise TypeError(f"cannot describe a model from {type(model).__name__}; pass a ModelSpec or a dict")
