"""Parameter counts from a Hugging Face ``config.json``, computed from the shape alone (no weights, no torch).

The counts follow the module layout of the ``transformers`` model classes, so they match
``sum(p.numel() for p in model.parameters())`` exactly for the families covered here:

- GPT-2 (``c_attn``/``c_fc``/``c_proj`` with biases, LayerNorm with bias, learned positions, tied head);
- GPT-NeoX / Pythia (fused QKV with bias, two LayerNorms per layer, untied head);
- the Llama family: Llama, Mistral, Qwen2/3, Gemma, Phi-3 and other RMSNorm decoders with a gated (SwiGLU:
  3 matrices) MLP and grouped-query attention (``num_key_value_heads``);
- mixtures of experts on that base: Mixtral (``num_local_experts``), Qwen-MoE (``num_experts``, shared expert
  and its gate, ``decoder_sparse_step``/``mlp_only_layers``), DeepSeek (``n_routed_experts``,
  ``n_shared_experts``, ``first_k_dense_replace``) including multi-head latent attention (DeepSeek-V2/V3).

Active parameters count the router, the shared experts and ``num_experts_per_tok`` routed experts per MoE
layer, plus everything outside the experts (torchtitan/Megatron convention, reference §8).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mfumon.exporter.modelspec._spec import ModelSpec

# transformers' per-class defaults for tie_word_embeddings when config.json omits it.
_TIED_BY_DEFAULT = {"gpt2", "gemma", "gemma2", "gemma3_text"}
# Qwen2 attention always has q/k/v biases (no o bias) and its config has no ``attention_bias`` key.
_QKV_BIAS_BY_DEFAULT = {"qwen2", "qwen2_moe"}
# Per-head RMSNorm on queries and keys (``q_norm``/``k_norm`` of size head_dim).
_QK_NORM = {"qwen3", "qwen3_moe", "gemma3_text"}
# Pre- and post-norm around both attention and MLP: four norms per layer.
_FOUR_NORMS = {"gemma2", "gemma3_text"}


def load_hf_config(config: Mapping[str, Any] | str | os.PathLike[str] | Any) -> dict[str, Any]:
    """A config as a dict, from a mapping, a ``PretrainedConfig``, a config.json path or its folder."""
    if isinstance(config, Mapping):
        cfg = dict(config)
    elif isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        cfg = json.loads(path.read_text(encoding="utf-8"))
    elif hasattr(config, "to_dict"):
        cfg = dict(config.to_dict())
    else:
        raise TypeError(f"expected a config mapping, a config.json path or a PretrainedConfig, got {config!r}")
    # Multimodal wrappers (Llava, Qwen2-VL, ...) keep the language model under text_config.
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and "hidden_size" not in cfg:
        cfg = {**dict(text), "_name_or_path": cfg.get("_name_or_path")}
    return cfg


def from_hf_config(
    config: Mapping[str, Any] | str | os.PathLike[str] | Any,
    *,
    seq_len: int | None = None,
    name: str | None = None,
) -> ModelSpec:
    """Describe a model from its Hugging Face config (dict, path, folder or ``PretrainedConfig``).

    Args:
        config: the config.
        seq_len: the sequence length the job trains or serves at; the config's maximum context is *not*
            used by default, since jobs rarely run at it and it would inflate the attention term.
        name: a label for the model; defaults to the config's ``_name_or_path`` or ``model_type``.
    """
    cfg = load_hf_config(config)
    model_type = str(cfg.get("model_type", ""))
    if model_type == "gpt2" or "n_embd" in cfg:
        total, active = _count_gpt2(cfg)
    elif model_type == "gpt_neox":
        total, active = _count_gpt_neox(cfg)
    elif "hidden_size" in cfg and "num_hidden_layers" in cfg:
        total, active = _count_decoder(cfg, model_type)
    else:
        raise ValueError(
            f"cannot count parameters of model_type {model_type!r}: describe it with from_module() "
            "or explicit numbers (ModelSpec(params=...))"
        )
    layers, heads, head_dim = _shape(cfg)
    label = name or cfg.get("_name_or_path") or model_type or None
    return ModelSpec(
        params=total,
        active_params=active if active != total else None,
        layers=layers,
        heads=heads,
        head_dim=head_dim,
        seq_len=seq_len,
        name=str(label)[:128] if label else None,
        kv_heads=_kv_heads(cfg, heads),
    )


def _kv_heads(cfg: Mapping[str, Any], heads: int) -> int | None:
    """Key/value heads of grouped-query attention; None for MLA, whose cache is a compressed latent instead."""
    if cfg.get("kv_lora_rank"):
        return None
    kv_heads = cfg.get("num_key_value_heads") or cfg.get("num_kv_heads") or cfg.get("multi_query_group_num")
    if cfg.get("multi_query") is True:  # Falcon-7B style MQA
        return 1
    return int(kv_heads) if kv_heads else heads


# transformers' torch_dtype spellings -> the storage names job reports use
_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


def serving_dtype_from_hf_config(config: Mapping[str, Any] | str | os.PathLike[str] | Any) -> str | None:
    """How the weights are stored, from ``quantization_config`` or ``torch_dtype``: int4, int8, fp8, fp4, bf16...

    AWQ/GPTQ/bitsandbytes give their bit width, FP8 and ModelOpt/compressed-tensors their number format;
    quantisation scales are not counted (a few percent more bytes at group size 128). None when unknown.
    """
    cfg = load_hf_config(config)
    quant = cfg.get("quantization_config")
    if isinstance(quant, Mapping):
        quantized = _quantized_dtype(quant)
        if quantized is not None:
            return quantized
    dtype = cfg.get("torch_dtype") or cfg.get("dtype")
    return _TORCH_DTYPES.get(str(dtype)) if dtype else None


def _quantized_dtype(quant: Mapping[str, Any]) -> str | None:
    method = str(quant.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    if method == "mxfp4":
        return "fp4"
    if method == "bitsandbytes":
        return "int4" if quant.get("load_in_4bit") else "int8" if quant.get("load_in_8bit") else None
    if method == "modelopt":
        algo = str(quant.get("quant_algo", "")).upper()
        return "fp8" if "FP8" in algo else "fp4" if "FP4" in algo else None
    if method == "compressed-tensors":
        for group in (quant.get("config_groups") or {}).values():
            weights = group.get("weights") if isinstance(group, Mapping) else None
            if isinstance(weights, Mapping) and weights.get("num_bits"):
                kind = "fp" if weights.get("type") == "float" else "int"
                return f"{kind}{int(weights['num_bits'])}" if int(weights["num_bits"]) in (4, 8) else None
        return None
    bits = quant.get("bits") or quant.get("w_bit")
    if bits in (4, 8) and method in ("awq", "gptq", "marlin", "gptq_marlin", "awq_marlin", "hqq", "quark"):
        return f"int{bits}"
    return None


def _shape(cfg: Mapping[str, Any]) -> tuple[int, int, int]:
    """(layers, heads, head_dim) for the attention term; MLA uses its query/key head size."""
    layers = int(cfg.get("num_hidden_layers") or cfg.get("n_layer") or cfg["num_layers"])
    heads = int(cfg.get("num_attention_heads") or cfg["n_head"])
    hidden = int(cfg.get("hidden_size") or cfg["n_embd"])
    if cfg.get("kv_lora_rank"):
        head_dim = int(cfg["qk_nope_head_dim"]) + int(cfg["qk_rope_head_dim"])
    else:
        head_dim = int(cfg.get("head_dim") or hidden // heads)
    return layers, heads, head_dim


def _tied(cfg: Mapping[str, Any], model_type: str) -> bool:
    return bool(cfg.get("tie_word_embeddings", model_type in _TIED_BY_DEFAULT))


def _count_gpt2(cfg: Mapping[str, Any]) -> tuple[int, int]:
    """GPT-2: Conv1D layers with biases, LayerNorm (weight + bias), learned positions, head tied to wte."""
    h, vocab = int(cfg["n_embd"]), int(cfg["vocab_size"])
    ff = int(cfg.get("n_inner") or 4 * h)
    layer = (
        2 * h  # ln_1
        + (h * 3 * h + 3 * h)  # attn.c_attn
        + (h * h + h)  # attn.c_proj
        + 2 * h  # ln_2
        + (h * ff + ff)  # mlp.c_fc
        + (ff * h + h)  # mlp.c_proj
    )
    embeddings = vocab * h + int(cfg["n_positions"]) * h
    head = 0 if _tied(cfg, "gpt2") else vocab * h
    total = embeddings + int(cfg["n_layer"]) * layer + 2 * h + head
    return total, total


def _count_gpt_neox(cfg: Mapping[str, Any]) -> tuple[int, int]:
    """GPT-NeoX / Pythia: fused query_key_value and dense layers with biases, LayerNorms with bias."""
    h, vocab, ff = int(cfg["hidden_size"]), int(cfg["vocab_size"]), int(cfg["intermediate_size"])
    layer = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * ff + ff) + (ff * h + h)
    head = 0 if _tied(cfg, "gpt_neox") else vocab * h
    total = vocab * h + int(cfg["num_hidden_layers"]) * layer + 2 * h + head
    return total, total


def _count_decoder(cfg: Mapping[str, Any], model_type: str) -> tuple[int, int]:
    """Llama-style RMSNorm decoders, dense or MoE; returns (total, active)."""
    h, vocab, layers = int(cfg["hidden_size"]), int(cfg["vocab_size"]), int(cfg["num_hidden_layers"])
    attention = _attention_params(cfg, model_type)
    norms = (4 if model_type in _FOUR_NORMS else 2) * h
    dense_mlp = _mlp_params(h, int(cfg["intermediate_size"]), bool(cfg.get("mlp_bias", False)))
    total = active = 0
    for index in range(layers):
        moe = _moe_layer_params(cfg, index)
        mlp_total, mlp_active = moe if moe is not None else (dense_mlp, dense_mlp)
        total += attention + norms + mlp_total
        active += attention + norms + mlp_active
    outside = vocab * h + h + (0 if _tied(cfg, model_type) else vocab * h)  # embeddings, final norm, head
    return total + outside, active + outside


def _mlp_params(h: int, ff: int, bias: bool = False) -> int:
    """Gated MLP (gate, up, down projections: SwiGLU/GeGLU)."""
    return 3 * h * ff + ((2 * ff + h) if bias else 0)


def _attention_params(cfg: Mapping[str, Any], model_type: str) -> int:
    h, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    bias = cfg.get("attention_bias")
    if cfg.get("kv_lora_rank"):
        return _mla_params(cfg, h, heads, bool(bias))
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    q, kv = heads * head_dim, kv_heads * head_dim
    qkv_bias = bool(bias) if bias is not None else model_type in _QKV_BIAS_BY_DEFAULT
    params = h * q + 2 * h * kv + q * h  # q, k, v, o projections
    params += (q + 2 * kv) if qkv_bias else 0
    params += h if bias else 0  # o_proj bias only with attention_bias=true
    params += 2 * head_dim if model_type in _QK_NORM else 0
    return params


def _mla_params(cfg: Mapping[str, Any], h: int, heads: int, bias: bool) -> int:
    """DeepSeek-V2/V3 multi-head latent attention: low-rank q and compressed kv with their RMSNorms."""
    nope, rope, v_dim = int(cfg["qk_nope_head_dim"]), int(cfg["qk_rope_head_dim"]), int(cfg["v_head_dim"])
    kv_rank, q_rank = int(cfg["kv_lora_rank"]), cfg.get("q_lora_rank")
    q_head = heads * (nope + rope)
    if q_rank:
        query = h * int(q_rank) + (int(q_rank) if bias else 0) + int(q_rank) + int(q_rank) * q_head
    else:
        query = h * q_head
    kv = h * (kv_rank + rope) + (kv_rank + rope if bias else 0) + kv_rank + kv_rank * heads * (nope + v_dim)
    out = heads * v_dim * h + (h if bias else 0)
    return query + kv + out


def _moe_layer_params(cfg: Mapping[str, Any], index: int) -> tuple[int, int] | None:
    """(total, active) MLP parameters of layer ``index`` if it is a MoE layer, else None."""
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts")
    if not experts or not _is_moe_layer(cfg, index):
        return None
    experts, top_k, h = int(experts), int(cfg["num_experts_per_tok"]), int(cfg["hidden_size"])
    expert = _mlp_params(h, int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"]))
    router = h * experts  # V3's e_score_correction_bias is a buffer in transformers, not a parameter
    shared = 0
    if cfg.get("shared_expert_intermediate_size"):  # Qwen-MoE: one wide shared expert and a sigmoid gate
        shared = _mlp_params(h, int(cfg["shared_expert_intermediate_size"])) + h
    elif cfg.get("n_shared_experts"):  # DeepSeek: n shared experts fused into one MLP
        shared = _mlp_params(h, int(cfg["n_shared_experts"]) * int(cfg["moe_intermediate_size"]))
    return experts * expert + router + shared, top_k * expert + router + shared


def _is_moe_layer(cfg: Mapping[str, Any], index: int) -> bool:
    if cfg.get("n_routed_experts"):  # DeepSeek
        first_dense = int(cfg.get("first_k_dense_replace") or 0)
        return index >= first_dense and index % int(cfg.get("moe_layer_freq") or 1) == 0
    if index in (cfg.get("mlp_only_layers") or ()):  # Qwen-MoE
        return False
    return (index + 1) % int(cfg.get("decoder_sparse_step") or 1) == 0
