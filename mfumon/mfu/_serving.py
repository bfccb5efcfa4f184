"""Serving arithmetic: MFU by phase (prefill, decode) and MBU, model bandwidth utilization, of inference jobs.

Decode is bound by memory bandwidth, so MFU alone cannot tell a healthy server from a badly batched one; MBU can.
Definition (Databricks/MosaicML, "LLM Inference Performance Engineering: Best Practices"; reference §7):

    MBU = bytes read per second / (num_gpus x peak memory bandwidth of one GPU)

One decode step of one model replica reads every weight once and the KV cache of every sequence in its batch:

    weight bytes              = N x b_w                 N: active parameters, b_w: bytes per weight (int4 = 0.5)
    KV-cache bytes per token  = 2 x L x H_kv x Q x b_kv  K and V, every layer; H_kv: KV heads (GQA; 1 for MQA)
    bytes per decode step     = weight bytes + B x T x KV-cache bytes per token   B sequences of T tokens each
    bytes per second          = bytes per decode step x decode tokens/s / B      each step emits B tokens

Estimates, stated in every result's `assumptions`: the whole weight set is read per step (embedding rows and the
activations are ignored; a MoE at large batch touches more experts than its active parameters); quantisation
scales and zero points are not counted; attention reads the whole KV cache of each sequence (no sliding window,
no MLA compression).

MFU by phase uses the inference FLOPs formula (PaLM App. B, `_flops.py`) with the phase's own context length,
T = mean prompt length in prefill and mean context in decode, over the job's whole dense peak, so that the two
phases add up to the job's MFU. Where the engine says how long it was busy in a phase (TGI's forward time per
method), the phase's *active* MFU divides that phase's FLOPs by its busy time instead: how well the phase uses
the GPUs while it runs, the number that judges prefill.

Engines that estimate their own FLOPs (vLLM 0.17+, SGLang 0.5.10+ with ``--enable-mfu-metrics``) are shown beside
ours, over the same dense peak: engine MFU = engine FLOP/s / (num_gpus x dense peak), engine MBU = engine bytes
read and written per second / (num_gpus x peak bandwidth). Their FLOPs count differently (see
docs/operators/inference.md), so the two need not match; a ratio above 1 is not shown, the FLOP/s are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from ._checks import check_at_least, check_num_gpus
from ._flops import ModelShape, flops_per_token

StorageDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
STORAGE_DTYPES: tuple[StorageDtype, ...] = get_args(StorageDtype)
BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}
PHASES: tuple[str, ...] = ("prefill", "decode")

FORMULAS: dict[str, str] = {
    "flops_per_token": "2*N + 4*L*H*Q*T (T: mean prompt tokens in prefill, mean context tokens in decode)",
    "phase_mfu": "phase tokens/s * phase FLOPs per token / (num_gpus * dense peak FLOP/s per GPU)",
    "mfu": "prefill MFU + decode MFU",
    "active_mfu": "phase FLOPs / (seconds the engine was busy in the phase * num_gpus * dense peak FLOP/s per GPU)",
    "weight_bytes": "N * b_w",
    "kv_cache_bytes_per_token": "2 * L * H_kv * Q * b_kv",
    "decode_step_bytes": "N * b_w + B * T * 2 * L * H_kv * Q * b_kv",
    "mbu": "decode_step_bytes * decode tokens/s / B / (num_gpus * peak memory bandwidth per GPU)",
    "engine_mfu": "engine FLOPs per GPU / interval_seconds / dense peak FLOP/s per GPU (the engine's own count)",
    "engine_mbu": "engine bytes read and written per GPU / interval_seconds / peak memory bandwidth per GPU",
}


def storage_dtype_for(compute_dtype: str) -> StorageDtype:
    """The storage a compute dtype implies when the job names none: fp8 matmuls keep a bf16 KV cache ("auto").

    bf16 and fp8 (and anything else) fall to the default, bf16: only the dtypes stored otherwise are listed.
    """
    return {"fp16": "fp16", "tf32": "fp32", "fp32": "fp32"}.get(compute_dtype, "bf16")  # type: ignore[return-value]


def weight_bytes(shape: ModelShape, weight_dtype: StorageDtype) -> float | None:
    """Bytes of the weights one token goes through (active parameters for a MoE); None without params."""
    params = shape.active_params if shape.active_params is not None else shape.params
    if params is None:
        return None
    return params * BYTES_PER_ELEMENT[weight_dtype]


def kv_cache_bytes_per_token(shape: ModelShape, kv_cache_dtype: StorageDtype) -> float | None:
    """K and V of one token in every layer: 2·L·H_kv·Q·b_kv; H_kv defaults to H (MHA). None without the shape."""
    kv_heads = shape.kv_heads if shape.kv_heads is not None else shape.heads
    if shape.layers is None or shape.head_dim is None or kv_heads is None:
        return None
    return 2 * shape.layers * kv_heads * shape.head_dim * BYTES_PER_ELEMENT[kv_cache_dtype]


def decode_step_bytes(weights: float, kv_bytes_per_token: float, batch_size: float, context_tokens: float) -> float:
    """Bytes one decode step of a model replica reads: its weights once, and each sequence's KV cache."""
    kv_cache_bytes = batch_size * context_tokens * kv_bytes_per_token
    return weights + kv_cache_bytes


def compute_mbu(bytes_per_second: float, num_gpus: int, peak_bandwidth_per_gpu: float) -> float:
    """Bytes read per second / (num_gpus x peak memory bandwidth per GPU)."""
    check_at_least("bytes_per_second", bytes_per_second, 0.0)
    check_num_gpus(num_gpus)
    check_at_least("peak_bandwidth_per_gpu", peak_bandwidth_per_gpu, 0.0, strictly=True)
    return bytes_per_second / (num_gpus * peak_bandwidth_per_gpu)


@dataclass(frozen=True)
class ServingWindow:
    """What a serving engine did over one report interval, for the whole job.

    `prefill_tokens` are prompt tokens actually computed (prefix-cache hits excluded); `batch_size` is the mean
    number of sequences in a decode step of one model replica; `context_tokens` the mean tokens of context of a
    sequence being decoded; `prompt_tokens` the mean prompt length; `*_seconds` the time the engine was busy in
    each phase, when it says so; `engine_*_per_gpu` the engine's own estimate of one GPU's FLOPs and bytes moved
    over the interval, when it exports one.
    """

    interval_seconds: float
    prefill_tokens: float
    decode_tokens: float
    batch_size: float | None = None
    context_tokens: float | None = None
    prompt_tokens: float | None = None
    prefill_seconds: float | None = None
    decode_seconds: float | None = None
    engine_flops_per_gpu: float | None = None
    engine_bytes_per_gpu: float | None = None

    def __post_init__(self) -> None:
        check_at_least("interval_seconds", self.interval_seconds, 0.0, strictly=True)
        fields = ("prefill_tokens", "decode_tokens", "prefill_seconds", "decode_seconds")
        for name in (*fields, "engine_flops_per_gpu", "engine_bytes_per_gpu"):
            value = getattr(self, name)
            if value is not None:
                check_at_least(name, value, 0.0)
        for name in ("batch_size", "context_tokens", "prompt_tokens"):
            value = getattr(self, name)
            if value is not None:
                check_at_least(name, value, 0.0, strictly=True)

    @property
    def tokens_per_second(self) -> float:
        return (self.prefill_tokens + self.decode_tokens) / self.interval_seconds


@dataclass(frozen=True)
class PhaseResult:
    """One phase: throughput, the context its FLOPs formula used, FLOP/s, share of the peak, active MFU."""

    tokens_per_second: float
    context_tokens: float | None
    flops_per_token: float
    model_flops_per_second: float
    mfu: float | None
    active_mfu: float | None = None
    busy_seconds: float | None = None


@dataclass(frozen=True)
class EngineEstimate:
    """The serving engine's own estimate over the window, for the whole job, beside ours (same peaks).

    A ratio above 1 is left out (None): the engine's count is then wrong for this model or parallelism (SGLang
    does not divide the MLP by tensor parallelism), and the FLOP/s still show by how much.
    """

    flops_per_second: float | None
    mfu: float | None
    memory_bytes_per_second: float | None
    mbu: float | None


def engine_estimate(
    window: ServingWindow, num_gpus: int, peak_flops_per_gpu: float | None, peak_bandwidth_per_gpu: float | None
) -> EngineEstimate | None:
    """The engine's FLOP/s and bytes/s for the job and their share of the peaks; None when it exports neither."""
    if window.engine_flops_per_gpu is None and window.engine_bytes_per_gpu is None:
        return None
    check_num_gpus(num_gpus)
    per_gpu_flops = (
        None if window.engine_flops_per_gpu is None else window.engine_flops_per_gpu / window.interval_seconds
    )
    per_gpu_bytes = (
        None if window.engine_bytes_per_gpu is None else window.engine_bytes_per_gpu / window.interval_seconds
    )
    return EngineEstimate(
        flops_per_second=None if per_gpu_flops is None else per_gpu_flops * num_gpus,
        mfu=_share(per_gpu_flops, peak_flops_per_gpu),
        memory_bytes_per_second=None if per_gpu_bytes is None else per_gpu_bytes * num_gpus,
        mbu=_share(per_gpu_bytes, peak_bandwidth_per_gpu),
    )


def _share(per_gpu: float | None, peak_per_gpu: float | None) -> float | None:
    """per GPU / peak per GPU (the same as whole job / (num_gpus x peak)); None when unknown or above 1."""
    if per_gpu is None or not peak_per_gpu:
        return None
    share = per_gpu / peak_per_gpu
    return share if share <= 1 else None


@dataclass(frozen=True)
class ServingResult:
    """Phases, combined MFU and MBU of one report, with the inputs and estimates behind them."""

    phases: dict[str, PhaseResult]
    mfu: float | None
    model_flops_per_second: float
    mbu: float | None
    mbu_reason: str | None
    weight_dtype: StorageDtype
    kv_cache_dtype: StorageDtype
    batch_size: float | None
    context_tokens: float | None
    weight_bytes: float | None
    kv_cache_bytes_per_token: float | None
    decode_step_weight_bytes: float | None
    decode_step_kv_cache_bytes: float | None
    memory_bytes_per_second: float | None
    peak_memory_bytes_per_second: float | None
    bandwidth_source: str | None
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    engine: EngineEstimate | None = None

    @property
    def decode_step_bytes(self) -> float | None:
        if self.decode_step_weight_bytes is None or self.decode_step_kv_cache_bytes is None:
            return None
        return self.decode_step_weight_bytes + self.decode_step_kv_cache_bytes

    def as_json(self, shape: ModelShape) -> dict[str, Any]:
        """The `inference` object of the JSON API: numbers, the formulas and the symbols' values."""
        kv_heads = shape.kv_heads if shape.kv_heads is not None else shape.heads
        return {
            "phases": {name: vars(phase) for name, phase in self.phases.items()},
            "mfu": self.mfu,
            "mbu": self.mbu,
            "mbu_reason": self.mbu_reason,
            "batch_size": self.batch_size,
            "context_tokens": self.context_tokens,
            "weight_dtype": self.weight_dtype,
            "kv_cache_dtype": self.kv_cache_dtype,
            "weight_bytes": self.weight_bytes,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "decode_step_bytes": {
                "weights": self.decode_step_weight_bytes,
                "kv_cache": self.decode_step_kv_cache_bytes,
                "total": self.decode_step_bytes,
            },
            "memory_bytes_per_second": self.memory_bytes_per_second,
            "peak_memory_bytes_per_second": self.peak_memory_bytes_per_second,
            "bandwidth_source": self.bandwidth_source,
            "formulas": FORMULAS,
            "symbols": {
                "N": shape.active_params if shape.active_params is not None else shape.params,
                "L": shape.layers,
                "H": shape.heads,
                "H_kv": kv_heads,
                "Q": shape.head_dim,
                "B": self.batch_size,
                "T": self.context_tokens,
                "b_w": BYTES_PER_ELEMENT[self.weight_dtype],
                "b_kv": BYTES_PER_ELEMENT[self.kv_cache_dtype],
            },
            "assumptions": list(self.assumptions),
            "engine_flops_per_second": None if self.engine is None else self.engine.flops_per_second,
            "engine_mfu": None if self.engine is None else self.engine.mfu,
            "engine_memory_bytes_per_second": None if self.engine is None else self.engine.memory_bytes_per_second,
            "engine_mbu": None if self.engine is None else self.engine.mbu,
        }


def evaluate_serving(
    *,
    shape: ModelShape,
    window: ServingWindow,
    num_gpus: int,
    peak_flops_per_gpu: float | None,
    peak_bandwidth_per_gpu: float | None,
    bandwidth_reason: str | None = None,
    bandwidth_source: str | None = None,
    weight_dtype: StorageDtype = "bf16",
    kv_cache_dtype: StorageDtype = "bf16",
) -> ServingResult:
    """MFU by phase, combined MFU and MBU of one serving window. Missing inputs give None and a reason."""
    assumptions: list[str] = []
    peak_flops_per_second = num_gpus * peak_flops_per_gpu if peak_flops_per_gpu else None
    decode_context = window.context_tokens or shape.seq_len
    prefill_context = window.prompt_tokens or window.context_tokens or shape.seq_len
    if window.context_tokens is None and shape.seq_len is not None:
        assumptions.append(
            f"decode context taken as model.seq_len ({shape.seq_len}): the report sent no context_tokens"
        )
    if window.prompt_tokens is None and prefill_context is not None:
        assumptions.append("prefill attention span taken as the decode context: the report sent no prompt_tokens")
    phases = {
        "prefill": _phase(
            shape,
            window.prefill_tokens,
            window.interval_seconds,
            prefill_context,
            peak_flops_per_second,
            window.prefill_seconds,
        ),
        "decode": _phase(
            shape,
            window.decode_tokens,
            window.interval_seconds,
            decode_context,
            peak_flops_per_second,
            window.decode_seconds,
        ),
    }
    combined_flops_per_second = sum(phase.model_flops_per_second for phase in phases.values())
    mfu = None if peak_flops_per_second is None else combined_flops_per_second / peak_flops_per_second

    weights = weight_bytes(shape, weight_dtype)
    kv_per_token = kv_cache_bytes_per_token(shape, kv_cache_dtype)
    if shape.kv_heads is None and kv_per_token is not None:
        assumptions.append("model.kv_heads not given: every head keeps its own K and V (MHA); GQA models read less")
    batch = window.batch_size
    if batch is not None and batch < 1 and window.decode_tokens > 0:
        assumptions.append(f"batch_size {batch:g} < 1 while decoding: taken as 1 sequence per step")
        batch = 1.0
    result = ServingResult(
        phases=phases,
        mfu=mfu,
        model_flops_per_second=combined_flops_per_second,
        mbu=None,
        mbu_reason=None,
        weight_dtype=weight_dtype,
        kv_cache_dtype=kv_cache_dtype,
        batch_size=batch,
        context_tokens=decode_context,
        weight_bytes=weights,
        kv_cache_bytes_per_token=kv_per_token,
        decode_step_weight_bytes=weights,
        decode_step_kv_cache_bytes=None,
        memory_bytes_per_second=None,
        peak_memory_bytes_per_second=None if peak_bandwidth_per_gpu is None else num_gpus * peak_bandwidth_per_gpu,
        bandwidth_source=bandwidth_source,
        assumptions=tuple(assumptions),
        engine=engine_estimate(window, num_gpus, peak_flops_per_gpu, peak_bandwidth_per_gpu),
    )
    if window.decode_tokens == 0 and peak_bandwidth_per_gpu is not None:
        return replace(result, mbu=0.0, memory_bytes_per_second=0.0)  # no decode step ran: nothing was read
    reason = _mbu_missing(weights, kv_per_token, batch, decode_context, peak_bandwidth_per_gpu, bandwidth_reason)
    if reason is not None:
        return replace(result, mbu_reason=reason)
    assert weights is not None and kv_per_token is not None and batch is not None and decode_context is not None
    assert peak_bandwidth_per_gpu is not None
    kv_cache_bytes = batch * decode_context * kv_per_token
    step_bytes = decode_step_bytes(weights, kv_per_token, batch, decode_context)
    decode_steps_per_second = window.decode_tokens / window.interval_seconds / batch
    memory_bytes_per_second = step_bytes * decode_steps_per_second
    mbu = compute_mbu(memory_bytes_per_second, num_gpus, peak_bandwidth_per_gpu)
    result = replace(result, decode_step_kv_cache_bytes=kv_cache_bytes, memory_bytes_per_second=memory_bytes_per_second)
    if mbu > 1:
        reason = f"implausible MBU {mbu:.3g} > 1: the batch size, context, model shape or dtypes are wrong"
        return replace(result, mbu_reason=reason)
    return replace(result, mbu=mbu)


def _phase(
    shape: ModelShape,
    tokens: float,
    interval_seconds: float,
    context_tokens: float | None,
    peak_flops_per_second: float | None,
    busy_seconds: float | None,
) -> PhaseResult:
    """One phase's FLOPs with its own context length T (the attention term needs T)."""
    context = None if context_tokens is None else max(1, round(context_tokens))
    phase_shape = replace(shape, seq_len=context)  # None drops the attention term
    phase_flops_per_token = flops_per_token(phase_shape, "inference")
    tokens_per_second = tokens / interval_seconds
    model_flops_per_second = tokens_per_second * phase_flops_per_token
    mfu = None if peak_flops_per_second is None else model_flops_per_second / peak_flops_per_second
    active_mfu = None
    if busy_seconds and peak_flops_per_second is not None:
        active_mfu = tokens * phase_flops_per_token / (busy_seconds * peak_flops_per_second)
    return PhaseResult(
        tokens_per_second, context_tokens, phase_flops_per_token, model_flops_per_second, mfu, active_mfu, busy_seconds
    )


def _mbu_missing(
    weights: float | None,
    kv_per_token: float | None,
    batch_size: float | None,
    context_tokens: float | None,
    peak_bandwidth_per_gpu: float | None,
    bandwidth_reason: str | None,
) -> str | None:
    """Why MBU cannot be computed, or None when every input is known."""
    if peak_bandwidth_per_gpu is None:
        return bandwidth_reason or "peak memory bandwidth unknown: send peak_memory_bandwidth_per_gpu"
    if weights is None:
        return "model.params (or flops_per_token only) unknown: MBU needs the parameter count"
    if kv_per_token is None:
        return "the KV cache size needs model.layers, model.heads (or kv_heads) and model.head_dim"
    if batch_size is None:
        return "batch_size unknown: report batch_size (mean sequences per decode step) or requests_running"
    if context_tokens is None:
        return "context length unknown: report context_tokens or model.seq_len"
    return None
