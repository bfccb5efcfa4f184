"""Diagnosis rules that read the job's latest profile: exposed communication by parallelism, ranks that wait, and
kernels that keep the tensor cores idle. Each finding cites the profile (its id and when it was captured).

GPU-seconds at stake: the profile's share of device time applied to the job's step time so far (the profile is a
sample of a few steps; the waterfall is the whole run). Training jobs only: a profile captures training steps.
"""

from __future__ import annotations

from typing import Any

from mfumon.api.diagnosis.facts import Finding, JobFacts
from mfumon.api.diagnosis.kinds import TRAINING, RuleSpec, applies_to
from mfumon.api.state.profiles import ProfileFigures

#: A group's exposed communication worth naming, as a share of the profiled device time.
GROUP_EXPOSED = 0.05
#: A rank waits long when its communication share exceeds the median's by this factor and this much.
WAIT_FACTOR, WAIT_MARGIN = 1.5, 0.05
#: Below this share of compute time in tensor-core kernels, the kernels are named.
TENSOR_CORE_SHARE = 0.5

ADVICE = {
    "tp": "Tensor-parallel collectives (the all-gathers and reduce-scatters of every layer) are on the critical path. "
    "Keep tensor parallelism inside a node (NVLink): TP across nodes over InfiniBand/RoCE is the usual cause. Overlap "
    "them with the GEMMs (Megatron --tp-comm-overlap with sequence parallelism, TransformerEngine userbuffers, "
    "PyTorch async TP), or lower the TP degree and add data parallelism.",
    "pp": "Pipeline send/recv is exposed: the stages wait for activations. When the time is in send/recv kernels, the "
    "link between stages is slow: place neighbouring stages on the same node or rail, and overlap p2p with compute "
    "(Megatron overlaps p2p in the interleaved schedule). When the device sits idle instead (see idle_ratio), it is "
    "the bubble: more micro-batches per step, an interleaved schedule, or fewer stages.",
    "dp": "Data-parallel gradient sync (all-reduce, or FSDP's all-gather and reduce-scatter) is exposed. FSDP: "
    "backward_prefetch=BACKWARD_PRE, forward_prefetch=True, limit_all_gathers; FSDP2 reshard_after_forward=False for "
    "the last blocks; HSDP to keep sharding inside a node. DDP: bucket_cap_mb, gradient_as_bucket_view. Megatron: "
    "--overlap-grad-reduce --overlap-param-gather. More gradient accumulation per sync amortises it.",
    "ep": "Expert-parallel all-to-all (token dispatch and combine) is exposed. Every rank waits for the one with the "
    "most tokens: check router balance (load-balancing loss, capacity factor, token dropping); keep expert "
    "parallelism inside a node; overlap dispatch/combine with expert compute (DeepEP, Megatron MoE a2a overlap).",
    "cp": "Context-parallel exchange (ring attention send/recv, or Ulysses all-to-all) is exposed: give each rank a "
    "longer chunk of the sequence, keep context parallelism inside a node, or use all-to-all CP within NVLink.",
    "other": "Collectives whose process group names no parallelism are exposed. Name the groups (DeviceMesh "
    "mesh_dim_names such as 'tp', 'dp'; group_desc= in torch.distributed.new_group; Megatron names its own) so the "
    "profile can say which parallelism it is and the advice can be specific.",
}


def _cite(profile: ProfileFigures) -> dict[str, Any]:
    return {
        "profile_id": profile.profile_id,
        "profile_captured_at": profile.captured_at,
        "profiled_ranks": profile.ranks,
        "profiled_steps": profile.steps,
    }


def _group_rule(group: str) -> RuleSpec:
    def rule(facts: JobFacts) -> Finding | None:
        profile = facts.profile
        figures = profile.group(group) if profile is not None else None
        if profile is None or figures is None or figures.exposed_comm_ratio < GROUP_EXPOSED:
            return None
        evidence = {
            "group": group,
            "exposed_comm_ratio": round(figures.exposed_comm_ratio, 4),
            "comm_ratio": round(figures.comm_ratio, 4),
            "overlapped_share": round(1 - figures.exposed_comm_ratio / figures.comm_ratio, 4)
            if figures.comm_ratio
            else None,
            "top_collective": figures.top_collective,
            "idle_ratio": round(profile.idle_ratio, 4),
            **_cite(profile),
        }
        return Finding(
            f"exposed_{group}_communication",
            facts.step_gpu_seconds * figures.exposed_comm_ratio,
            evidence,
            ADVICE[group],
        )

    rule.__name__ = f"exposed_{group}_communication"
    return RuleSpec(rule, frozenset({TRAINING}))


@applies_to(TRAINING)
def waiting_ranks(facts: JobFacts) -> Finding | None:
    """Ranks spending much longer in collectives than the median: they wait for a slower rank or link."""
    profile = facts.profile
    if profile is None or profile.median_rank_comm_ratio is None or profile.ranks < 2:
        return None
    median = profile.median_rank_comm_ratio
    waiting = [(r, v) for r, v in profile.waiting_ranks if v > median * WAIT_FACTOR and v - median >= WAIT_MARGIN]
    if not waiting:
        return None
    excess = sum(v - median for _, v in waiting) / profile.ranks
    evidence = {
        "waiting_ranks": [{"rank": r, "comm_ratio": round(v, 4)} for r, v in waiting],
        "median_rank_comm_ratio": round(median, 4),
        "least_waiting_rank": None
        if profile.least_comm_rank is None
        else {"rank": profile.least_comm_rank[0], "comm_ratio": round(profile.least_comm_rank[1], 4)},
        **_cite(profile),
    }
    advice = (
        "These ranks sit in collectives far longer than the others: they wait for a slower peer or link. The rank "
        "that waits least is the likeliest one they wait for (a slower GPU, a throttled clock, more tokens, a "
        "straggling data loader); if the waiting ranks share a node or switch, suspect that node's NIC or link "
        "(check the node's InfiniBand/RoCE health and the GPU's clocks)."
    )
    return Finding("ranks_waiting_in_communication", facts.step_gpu_seconds * excess, evidence, advice)


@applies_to(TRAINING)
def kernels_without_tensor_cores(facts: JobFacts) -> Finding | None:
    """Most compute time in kernels that are not tensor-core matmuls: the profile names them."""
    profile = facts.profile
    share = profile.tensor_core_ratio if profile is not None else None
    if profile is None or share is None or share >= TENSOR_CORE_SHARE:
        return None
    compute = facts.gpu_seconds.get("compute", 0.0)
    evidence = {
        "tensor_core_share_of_compute": round(share, 4),
        "top_kernels": [{"name": name, "share_of_compute": round(s, 4)} for name, s in profile.top_kernels],
        **_cite(profile),
    }
    advice = (
        "Most compute time goes to kernels that keep the tensor cores idle (elementwise ops, norms, copies, "
        "reductions; the top ones are listed): fuse them (torch.compile, fused RMSNorm/LayerNorm and optimizers, "
        "FlashAttention), drop needless dtype casts and copies, and train in bf16 (fp32 matmuls skip the tensor "
        "cores unless TF32 is allowed)."
    )
    return Finding("kernels_without_tensor_cores", compute * (1 - share), evidence, advice)


PROFILE_RULES: tuple[RuleSpec, ...] = (
    *(_group_rule(group) for group in ("tp", "pp", "dp", "ep", "cp", "other")),
    waiting_ranks,
    kernels_without_tensor_cores,
)
