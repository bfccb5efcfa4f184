"""Describe a live PyTorch module: count its unique parameters, take the shape from its config if it has one.

torch is never imported here: the module object is duck-typed (``parameters()`` and ``numel()``), so this
works for ``torch.nn.Module``, Lightning modules and Hugging Face ``PreTrainedModel`` alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mfumon.exporter.modelspec._hf import from_hf_config
from mfumon.exporter.modelspec._spec import ModelSpec

# Attribute spellings of the attention shape in model configs (HF, nanoGPT, torchtitan, Megatron).
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_WIDTH_KEYS = ("hidden_size", "n_embd", "dim", "d_model")
_WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel")


def count_parameters(module: Any) -> int:
    """Unique parameters of a module: ``parameters()`` already yields a tied weight once.

    Count before FSDP/sharding wraps the model: a flattened shard reports only its local elements.
    """
    return int(sum(param.numel() for param in module.parameters()))


def from_module(
    module: Any,
    *,
    seq_len: int | None = None,
    name: str | None = None,
    config: Any = None,
) -> ModelSpec:
    """Describe a module: ``params`` from its parameters, shape (and MoE active share) from its config.

    Args:
        module: a ``torch.nn.Module`` (anything with ``parameters()``).
        seq_len: the sequence length the job runs at (nanoGPT-style configs default to ``block_size``).
        name: a label; defaults to the config's ``_name_or_path`` or the module's class name.
        config: the model config when the module has no ``.config`` attribute.
    """
    if type(module).__name__ in _WRAPPERS and hasattr(module, "module"):
        module = module.module  # describe the model, not DDP around it (its name and config are the model's)
    params = count_parameters(module)
    cfg = _config_dict(config if config is not None else getattr(module, "config", None))
    label = name or (cfg or {}).get("_name_or_path") or type(module).__name__
    if cfg and "model_type" in cfg:
        spec = _from_hf_like(cfg, params, seq_len)
        if spec is not None:
            return spec.replace(name=str(label)[:128])
    layers, heads, head_dim = _shape(cfg or {})
    if seq_len is None and cfg and "n_embd" in cfg:
        seq_len = cfg.get("block_size")  # nanoGPT's estimate_mfu uses block_size as T
    return ModelSpec(
        params=params,
        layers=layers,
        heads=heads,
        head_dim=head_dim,
        seq_len=int(seq_len) if seq_len else None,
        name=str(label)[:128],
    )


def _from_hf_like(cfg: Mapping[str, Any], params: int, seq_len: int | None) -> ModelSpec | None:
    """Shape from the HF config; active share = counted params minus the config's inactive experts."""
    try:
        from_config = from_hf_config(cfg, seq_len=seq_len)
    except (KeyError, TypeError, ValueError):
        return None
    active = None
    if from_config.active_params is not None and from_config.params is not None:
        inactive = from_config.params - from_config.active_params
        active = params - inactive if 0 < params - inactive < params else None
    return from_config.replace(params=params, active_params=active)


def _config_dict(config: Any) -> dict[str, Any] | None:
    if config is None:
        return None
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    public = {name: getattr(config, name, None) for name in dir(config) if not name.startswith("_")}
    return {k: v for k, v in public.items() if isinstance(v, (int, float, str, bool))} or None


def _first(cfg: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _shape(cfg: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    layers, heads, width = _first(cfg, _LAYER_KEYS), _first(cfg, _HEAD_KEYS), _first(cfg, _WIDTH_KEYS)
    head_dim = _first(cfg, ("head_dim",)) or (width // heads if width and heads else None)
    return layers, heads, head_dim
