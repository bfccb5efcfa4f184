"""Serving rules: our serving MFU beside the engine's own estimate (vLLM, SGLang ``--enable-mfu-metrics``).

Both divide FLOP/s by the same dense peak, so a gap between them is a gap between FLOPs counts. Each side counts
its own way (as read in vLLM 0.34.0 ``vllm/v1/metrics/perf.py`` and SGLang 0.5.23
``srt/managers/scheduler_components/metrics_reporter.py``); the finding names both conventions so that a user who
compares the two dashboards knows which terms make the difference, and which input of ours to check. The findings
from the engine's scheduler and latency figures (batching, KV cache, prefill, idle replicas, latency targets) are
in :mod:`mfumon.api.diagnosis.serving_rules`.
"""

from __future__ import annotations

from mfumon.api.diagnosis.facts import Finding, JobFacts
from mfumon.api.diagnosis.kinds import INFERENCE, applies_to, busy_gpu_seconds
from mfumon.api.diagnosis.serving_rules import SERVING_FINDINGS

#: ours / the engine's FLOP/s outside these bounds is worth a finding; inside, the conventions' usual spread.
ENGINE_AGREEMENT = (0.8, 1.25)

OURS: dict[str, str] = {
    "2N": "ours: 2N per prefilled or generated token (N: model.active_params, else params); no attention term "
    "(model.layers, heads, head_dim not given)",
    "2N+attention": "ours: 2N per prefilled or generated token (N: model.active_params, else params) + attention "
    "4 x layers x heads x head_dim x T (T: mean prompt in prefill, mean context in decode)",
    "override": "ours: the job's model.flops_per_token per prefilled or generated token",
}
THEIRS: dict[str, str] = {
    "vllm": "vLLM: per GPU, per scheduled token the matmuls (QKV and output projections, the MLP as 3 matrices, a "
    "MoE's routed experts per token) + attention 4 x heads x head_dim x layers x the token's whole context (prefill "
    "too: no causal half) + the LM head for sampled tokens only; no embedding; speculative draft tokens count",
    "sglang": "SGLang: per GPU, per token the QKV and output projections (divided by tensor parallelism) + the MLP as "
    "6 x hidden x intermediate_size (not divided by tensor parallelism; a MoE counted as one dense MLP) + attention "
    "4 x heads x head_dim x layers x the causal query-key pairs; no LM head, no embedding",
}
_UNKNOWN_ENGINE = "the engine's own per-GPU count (engine_estimator not reported)"


@applies_to(INFERENCE)
def engine_mfu_disagrees(facts: JobFacts) -> Finding | None:
    """Our serving FLOP/s and the engine's differ by more than the conventions' usual spread."""
    estimate = facts.engine_estimate
    if facts.kind != "inference" or estimate is None:
        return None
    ours, theirs = estimate.ours_flops_per_second, estimate.engine_flops_per_second
    if ours <= 0 or theirs <= 0:
        return None  # an idle interval (or an estimator that never ran) compares nothing
    ratio = ours / theirs
    low, high = ENGINE_AGREEMENT
    if low <= ratio <= high:
        return None
    compute = busy_gpu_seconds(facts)
    evidence: dict[str, object] = {
        "ours_flops_per_second": round(ours, 1),
        "engine_flops_per_second": round(theirs, 1),
        "ours_mfu": None if estimate.ours_mfu is None else round(estimate.ours_mfu, 4),
        "engine_mfu": None if estimate.engine_mfu is None else round(estimate.engine_mfu, 4),
        "ratio": round(ratio, 4),
        "bounds": list(ENGINE_AGREEMENT),
        "engine": estimate.engine,
        "ours_convention": OURS.get(estimate.ours_convention, estimate.ours_convention),
        "engine_convention": THEIRS.get(estimate.engine or "", _UNKNOWN_ENGINE),
    }
    if ratio > high:
        advice = (
            "Ours counts more than the engine: check the job's model (a MoE needs model.active_params, else all "
            "experts count; params that include the embedding add 2 x vocab x hidden per token) and its context "
            "(model.seq_len stands in when the engine sends none). An engine figure far below ours can also be an "
            "estimator that skipped a part of the model: VLLM_DEBUG_MFU_METRICS=1 logs vLLM's breakdown. "
        )
    else:
        advice = (
            "The engine counts more than ours: long contexts weigh its attention term (vLLM counts a prefill "
            "token's whole context, no causal half), SGLang under tensor parallelism counts the whole MLP on each "
            "GPU, and speculative decoding adds draft tokens; give model.layers, heads and head_dim so that ours "
            "counts attention too. "
        )
    advice += "Both divide by the same dense peak (mfumon.mfu): the gap is in the FLOPs, not in the GPUs."
    return Finding("engine_mfu_disagrees", compute * min(1.0, abs(1.0 - ratio)), evidence, advice)


SERVING_RULES = (engine_mfu_disagrees, *SERVING_FINDINGS)
