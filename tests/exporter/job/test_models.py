"""Model descriptors: parameter counts from real HF configs against published sizes and against transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mfumon.exporter.job.models import ModelSpec, count_parameters, describe_model, from_hf_config, from_module
from mfumon.exporter.modelspec import serving_dtype_from_hf_config

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA2 = FIXTURES / "meta-llama__Llama-2-7b-hf.config.json"
LLAMA3 = FIXTURES / "meta-llama__Meta-Llama-3-8B.config.json"
MIXTRAL = FIXTURES / "mistralai__Mixtral-8x7B-v0.1.config.json"
GPT2 = FIXTURES / "openai-community__gpt2.config.json"
QWEN_MOE = FIXTURES / "Qwen__Qwen1.5-MoE-A2.7B.config.json"
DEEPSEEK_V3 = FIXTURES / "deepseek-ai__DeepSeek-V3.config.json"


@pytest.mark.parametrize(
    ("path", "params"),
    [(LLAMA2, 6_738_415_616), (LLAMA3, 8_030_261_248), (GPT2, 124_439_808), (MIXTRAL, 46_702_792_704)],
)
def test_exact_published_sizes(path: Path, params: int) -> None:
    assert from_hf_config(path).params == params


@pytest.mark.parametrize(
    ("path", "total_billions", "active_billions"),
    [(MIXTRAL, 46.7, 12.9), (QWEN_MOE, 14.3, 2.7), (DEEPSEEK_V3, 671.0, 37.0)],
)
def test_moe_total_and_active_match_published_rounding(
    path: Path, total_billions: float, active_billions: float
) -> None:
    spec = from_hf_config(path)
    assert spec.params is not None and spec.active_params is not None
    assert round(spec.params / 1e9, 1) == total_billions
    # Publishers round active counts loosely ("37B activated" is 37.55B): within 2 %.
    assert spec.active_params / 1e9 == pytest.approx(active_billions, rel=0.02)


def test_mixtral_active_counts_two_of_eight_experts_plus_everything_else() -> None:
    spec = from_hf_config(MIXTRAL)
    expert = 3 * 4096 * 14336
    assert spec.params - spec.active_params == 32 * 6 * expert  # six idle experts in each of 32 layers


def test_shape_fields_and_gqa() -> None:
    llama3 = from_hf_config(json.loads(LLAMA3.read_text()), seq_len=8192)
    assert (llama3.layers, llama3.heads, llama3.head_dim, llama3.seq_len) == (32, 32, 128, 8192)
    assert llama3.active_params is None  # dense
    mha = dict(json.loads(LLAMA3.read_text()), num_key_value_heads=32)
    # Going from 8 to 32 KV heads adds 2 x 4096 x 3072 per layer (k and v projections).
    assert from_hf_config(mha).params - llama3.params == 32 * 2 * 4096 * 3072


def test_tied_embeddings_count_once() -> None:
    untied = dict(json.loads(GPT2.read_text()), tie_word_embeddings=False)
    assert from_hf_config(untied).params - from_hf_config(GPT2).params == 50257 * 768


def test_unknown_architecture_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="from_module"):
        from_hf_config({"model_type": "t5", "d_model": 512})


def test_config_folder_and_to_dict() -> None:
    spec = from_hf_config(LLAMA2.parent / LLAMA2.name, seq_len=4096)
    assert spec.to_dict() == {
        "params": 6_738_415_616,
        "layers": 32,
        "heads": 32,
        "head_dim": 128,
        "seq_len": 4096,
        "name": "meta-llama/Llama-2-7b-hf",
        "kv_heads": 32,
    }


def test_flops_per_token_formula() -> None:
    spec = ModelSpec(params=1000, active_params=400, layers=2, heads=3, head_dim=4, seq_len=5)
    assert spec.flops_per_token_for("training") == 6 * 400 + 12 * 2 * 3 * 4 * 5
    assert spec.flops_per_token_for("inference") == 2 * 400 + 4 * 2 * 3 * 4 * 5
    assert ModelSpec(params=10).flops_per_token_for() == 60  # no shape: no attention term
    assert ModelSpec(flops_per_token=7.5).flops_per_token_for() == 7.5
    assert ModelSpec().flops_per_token_for() is None


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        ModelSpec(params=10, active_params=11)
    with pytest.raises(ValueError, match="> 0"):
        ModelSpec(params=0)


def test_describe_model_dispatch() -> None:
    assert describe_model({"params": 7e9, "layers": 32}).params == 7e9
    assert describe_model(str(GPT2), seq_len=1024).seq_len == 1024
    spec = ModelSpec(params=5)
    assert describe_model(spec) is spec
    assert describe_model(spec, seq_len=9).seq_len == 9
    with pytest.raises(TypeError):
        describe_model(42)


def test_from_module_counts_unique_parameters() -> None:
    torch = pytest.importorskip("torch")

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(100, 16)
            self.body = torch.nn.Linear(16, 16)
            self.head = torch.nn.Linear(16, 100, bias=False)
            self.head.weight = self.embed.weight  # tied, counted once

    module = Tiny()
    assert count_parameters(module) == 100 * 16 + 16 * 16 + 16
    spec = from_module(module, seq_len=32)
    assert spec.params == 100 * 16 + 16 * 16 + 16
    assert spec.name == "Tiny" and spec.seq_len == 32 and spec.layers is None


def test_from_module_takes_nanogpt_style_shape_from_config() -> None:
    torch = pytest.importorskip("torch")

    class Config:
        n_layer, n_head, n_embd, block_size = 2, 4, 32, 64

    module = torch.nn.Linear(32, 32)
    spec = from_module(module, config=Config())
    assert (spec.layers, spec.heads, spec.head_dim, spec.seq_len) == (2, 4, 8, 64)


# -- against the real library --------------------------------------------------------------------------------

_TINY = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 32064,
}
_MLA = {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8}
_TINY_CASES = {
    "llama": {"attention_bias": True, "mlp_bias": True},
    "mistral": {},
    "qwen2": {},
    "qwen3": {"head_dim": 24},
    "qwen2_moe": {
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 40,
        "shared_expert_intermediate_size": 72,
    },
    "qwen3_moe": {
        "num_experts": 6,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 40,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [0],
    },
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "gemma": {"head_dim": 32},
    "gemma2": {"head_dim": 32},
    "phi3": {},
    "gpt_neox": {},
    "deepseek_v3": {
        **_MLA,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 20,
        "first_k_dense_replace": 1,
        "n_group": 2,
        "topk_group": 1,
    },
    "gpt2": {"n_embd": 64, "n_layer": 3, "n_head": 4, "n_positions": 32},
}


def _meta_model(config: object) -> object:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize(
    "model_type",
    [pytest.param(m, marks=pytest.mark.slow) if m == "deepseek_v3" else m for m in sorted(_TINY_CASES)],
)
def test_counts_equal_transformers_numel(model_type: str) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(model_type, **_TINY, **_TINY_CASES[model_type])
    model = _meta_model(config)
    assert from_hf_config(config).params == count_parameters(model)


@pytest.mark.parametrize("path", [LLAMA2, LLAMA3, MIXTRAL, GPT2, QWEN_MOE, DEEPSEEK_V3], ids=lambda p: p.stem)
def test_real_configs_equal_transformers_numel(path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    raw = json.loads(path.read_text())
    for remote_only in ("auto_map", "quantization_config"):
        raw.pop(remote_only, None)
    model = _meta_model(transformers.AutoConfig.for_model(**raw))
    assert from_hf_config(path).params == count_parameters(model)


def test_from_module_of_hf_moe_model_keeps_active_share() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model("mixtral", **_TINY, num_local_experts=4, num_experts_per_tok=2)
    model = _meta_model(config)
    spec = from_module(model, seq_len=16)
    expert = 3 * 64 * 96
    assert spec.params == count_parameters(model)
    assert spec.active_params == spec.params - 3 * 2 * expert  # two idle experts in each of three layers
    assert (spec.layers, spec.heads, spec.head_dim, spec.seq_len) == (3, 4, 16, 16)


@pytest.mark.parametrize(("config", "kv_heads"), [(LLAMA2, 32), (LLAMA3, 8), (MIXTRAL, 8), (DEEPSEEK_V3, None)])
def test_kv_heads_size_the_kv_cache(config: Path, kv_heads: int | None) -> None:
    # Llama-2-7B is MHA, Llama-3-8B and Mixtral use GQA with 8 KV heads, DeepSeek-V3's MLA caches a latent.
    assert from_hf_config(config).kv_heads == kv_heads


QUANTIZED = [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}, "int4"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128, "desc_act": False}, "int8"),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "int4"),
    (
        {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}},
        },
        "fp8",
    ),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "fp4"),
]


@pytest.mark.parametrize(
    ("quantization", "expected"), QUANTIZED, ids=[q[1] + "-" + q[0]["quant_method"] for q in QUANTIZED]
)
def test_serving_dtype_from_the_quantization_config(quantization: dict[str, object], expected: str) -> None:
    config = dict(json.loads(LLAMA3.read_text()), quantization_config=quantization)
    assert serving_dtype_from_hf_config(config) == expected


def test_serving_dtype_falls_back_to_torch_dtype() -> None:
    assert serving_dtype_from_hf_config(LLAMA3) == "bf16"
    assert serving_dtype_from_hf_config(LLAMA2) == "fp16"
    assert serving_dtype_from_hf_config({"model_type": "llama"}) is None
