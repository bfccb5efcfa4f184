"""The diagnosis rules: each looks at one job's facts and returns at most one finding, with the GPU-seconds at stake.

GPU-seconds at stake are what the cause cost the job so far, read off its waterfall where the cause has a category
of its own (exposed communication, data wait, bubbles, checkpoints, start-up, stalls, lost work), and estimated from
the shortfall otherwise: compute time x the fraction a slower pace, a lower clock or idle tensor pipes took away.
Thresholds sit below the alerts' (deploy/prometheus/rules): a finding explains, an alert pages.

Each rule declares the job kinds it applies to (``@applies_to``, :mod:`mfumon.api.diagnosis.kinds`): the step-time
rules judge training jobs only; the hardware and life-cycle rules (busy without reporting, throttling, failures,
start-up, the MFU accounting check) judge serving jobs too, in a serving job's words and at the GPU-seconds its
serving waterfall puts at stake.
"""

from __future__ import annotations

from statistics import fmean, median

from mfumon.api.diagnosis.collectives import COLLECTIVE_RULES
from mfumon.api.diagnosis.facts import Finding, GpuFacts, JobFacts
from mfumon.api.diagnosis.kinds import INFERENCE, TRAINING, RuleSpec, applies_to, busy_gpu_seconds
from mfumon.api.diagnosis.peers import PEER_RULES
from mfumon.api.diagnosis.profile import PROFILE_RULES
from mfumon.api.diagnosis.serving import SERVING_RULES
from mfumon.mfu import AGREEMENT_OVER_CLAIM, AGREEMENT_UNDER_CLAIM

Rule = RuleSpec

#: A step-time part (data wait, exposed communication, bubble) worth naming, as a share of step time.
STEP_SHARE = {"comm_exposed": 0.10, "data_wait": 0.05, "bubble": 0.05}
#: A badput category worth naming, as a share of the allocated time.
BADPUT_SHARE = 0.05
#: Straggler thresholds: tensor-activity spread across the job's GPUs, step-time deviation (MfumonJobStraggler's).
SPREAD = 0.2
DEVIATION = 0.2
#: Tensor pipes active for less than this share of the time the SMs are busy: kernels that do not feed them.
TENSOR_OF_SM = 0.3
SM_BUSY = 0.5
#: A GPU below this share of its max SM clock while throttled runs slow enough to pace a synchronous job.
CLOCK_SLOW = 0.9
BASELINE_FRACTION = 0.8  # MfumonMFUBelowBaseline's
FAILURES_REPEATED = 2
_NAMED = 8  # GPUs named at most in a finding's evidence


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _gpu_name(gpu: GpuFacts) -> dict[str, object]:
    return {"node": gpu.node, "gpu": gpu.index, "uuid": gpu.uuid}


def _step_finding(facts: JobFacts, category: str, cause: str, advice: str) -> Finding | None:
    """A step category (data wait, exposed communication, bubble) once it passes its share of step time."""
    seconds = facts.gpu_seconds.get(category, 0.0)
    step = facts.step_gpu_seconds
    if step <= 0 or seconds <= 0 or seconds / step < STEP_SHARE[category]:
        return None
    evidence = {
        "gpu_seconds": _round(seconds, 1),
        "share_of_step_time": _round(seconds / step),
        "share_of_allocated": _round(facts.share(seconds)),
    }
    return Finding(cause, seconds, evidence, advice)


def _badput_finding(facts: JobFacts, category: str, cause: str, advice: str, **evidence: object) -> Finding | None:
    """A badput category (checkpoint, init, stalled) once it passes its share of the allocation."""
    seconds = facts.gpu_seconds.get(category, 0.0)
    if seconds <= 0 or facts.share(seconds) < BADPUT_SHARE:
        return None
    shown = {"gpu_seconds": _round(seconds, 1), "share_of_allocated": _round(facts.share(seconds)), **evidence}
    return Finding(cause, seconds, shown, advice)


@applies_to(TRAINING)
def exposed_communication(facts: JobFacts) -> Finding | None:
    finding = _generic_exposed_communication(facts)
    if finding is None or facts.profile is None:
        return finding
    split = {g.group: round(g.exposed_comm_ratio, 4) for g in facts.profile.groups if g.exposed_comm_ratio > 0}
    cited = {"profile_id": facts.profile.profile_id, "profile_exposed_comm_ratio_by_group": split}
    return Finding(finding.cause, finding.gpu_seconds, {**finding.evidence, **cited}, finding.advice)


def _generic_exposed_communication(facts: JobFacts) -> Finding | None:
    return _step_finding(
        facts,
        "comm_exposed",
        "exposed_communication",
        "Overlap communication with compute: bucketed gradient all-reduce during backward (DDP bucket_cap_mb; "
        "Megatron --overlap-grad-reduce --overlap-param-gather), FSDP backward_prefetch=BACKWARD_PRE and "
        "forward_prefetch; keep tensor parallelism inside a node (NVLink); more gradient accumulation per "
        "all-reduce. A sudden rise is the fabric: check the job's nodes' InfiniBand/RoCE health.",
    )


@applies_to(TRAINING)
def data_loading(facts: JobFacts) -> Finding | None:
    return _step_finding(
        facts,
        "data_wait",
        "data_loading",
        "The GPUs wait for input: raise DataLoader num_workers and prefetch_factor, set pin_memory=True and "
        "persistent_workers=True; tokenize and shard the data set ahead of time, stage it on local NVMe, and check "
        "the read throughput each node gets from shared storage.",
    )


@applies_to(TRAINING)
def pipeline_bubbles(facts: JobFacts) -> Finding | None:
    return _step_finding(
        facts,
        "bubble",
        "pipeline_bubbles",
        "Shrink the pipeline bubble: more micro-batches per step (at least 4x the pipeline stages, through "
        "gradient accumulation), an interleaved schedule (Megatron --num-layers-per-virtual-pipeline-stage), "
        "or fewer pipeline stages with more tensor or data parallelism.",
    )


@applies_to(TRAINING)
def checkpoint_overhead(facts: JobFacts) -> Finding | None:
    saves: dict[str, object] = {}
    if facts.checkpoint_saves:
        saves["saves"] = facts.checkpoint_saves
    if facts.checkpoint_save_seconds is not None:
        saves["mean_save_seconds"] = _round(facts.checkpoint_save_seconds, 1)
    return _badput_finding(
        facts,
        "checkpoint",
        "checkpoint_overhead",
        "Save asynchronously and sharded (torch.distributed.checkpoint async_save, Megatron --async-save, "
        "Lightning/NeMo async checkpointing): training resumes while the writes drain; write to local NVMe and copy "
        "out; save less often: about every sqrt(2 x save time x mean time between failures).",
        **saves,
    )


@applies_to(TRAINING, INFERENCE)
def slow_startup(facts: JobFacts) -> Finding | None:
    advice = (
        "The serving engine's start-up (and every restart's) holds the GPUs before its first request: loading the "
        "weights, compiling and capturing CUDA graphs. Stage the weights on local NVMe or keep them in the page "
        "cache, keep the engine's compile cache on a volume that outlives the container, and scale out before the "
        "queue builds rather than from zero."
        if facts.kind == INFERENCE
        else "Start-up (and every restart's) holds the GPUs idle: load checkpoints sharded and in parallel, cache the "
        "container image and the compiled kernels on the nodes (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR), and "
        "build the data index once, not per rank."
    )
    return _badput_finding(facts, "init", "slow_startup", advice, restarts=facts.restarts)


@applies_to(TRAINING)
def stalled(facts: JobFacts) -> Finding | None:
    return _badput_finding(
        facts,
        "stalled",
        "stalled",
        "The job held its GPUs without progress (zero tokens, or silence): look for a hang in a collective and let "
        "it fail fast (TORCH_NCCL_ASYNC_ERROR_HANDLING=1, a shorter init_process_group timeout), and for a "
        "reporter that stopped while training went on.",
    )


@applies_to(TRAINING, INFERENCE)
def failures(facts: JobFacts) -> Finding | None:
    """Repeated failures, or one that threw away much progress (the work redone since the last checkpoint).

    A serving job has no progress to lose (no checkpoint, no steps to redo): only repeated failures count, at the
    GPU-seconds it spent down (the serving waterfall's ``down``: restarts, start-up, silence).
    """
    if facts.kind == INFERENCE:
        return _serving_failures(facts)
    lost = facts.gpu_seconds.get("lost", 0.0)
    repeated = facts.failures >= FAILURES_REPEATED
    if not repeated and (lost <= 0 or facts.share(lost) < BADPUT_SHARE):
        return None
    restarts = facts.restarts
    # every restart's start-up is paid again: the share of init time that the restarts cost
    reinit = facts.gpu_seconds.get("init", 0.0) * restarts / (restarts + 1)
    evidence: dict[str, object] = {
        "failures": facts.failures,
        "restarts": restarts,
        "lost_gpu_seconds": _round(lost, 1),
        "share_of_allocated": _round(facts.share(lost + reinit)),
    }
    if facts.exit_codes:
        evidence["exit_codes"] = list(facts.exit_codes)
    advice = (
        "Checkpoint more often to cut what each failure throws away (the lost time is progress since the last save); "
    )
    if repeated:
        advice += (
            "read the exit codes and the XIDs of the job's nodes (mfumon_gpu_xid_errors_total): failures that follow "
            "one node call for draining it; out-of-memory exits for a smaller micro-batch or activation checkpointing."
        )
    else:
        advice += "save asynchronously so that frequent saves stay cheap."
    return Finding("repeated_failures" if repeated else "lost_progress", lost + reinit, evidence, advice)


def _serving_failures(facts: JobFacts) -> Finding | None:
    if facts.failures < FAILURES_REPEATED:
        return None
    serving = facts.serving
    down = serving.waterfall.get("down", 0.0) if serving is not None and serving.waterfall else None
    if down is None:  # the engine's view is not known: the restarts' share of start-up, as for training
        down = facts.gpu_seconds.get("init", 0.0) * facts.restarts / (facts.restarts + 1)
    evidence: dict[str, object] = {
        "failures": facts.failures,
        "restarts": facts.restarts,
        "down_gpu_seconds": _round(down, 1),
        "share_of_allocated": _round(facts.share(down)),
    }
    if facts.exit_codes:
        evidence["exit_codes"] = list(facts.exit_codes)
    return Finding(
        "repeated_failures",
        down,
        evidence,
        "The server keeps failing and every restart reloads the model: read the exit codes and the XIDs of its nodes "
        "(mfumon_gpu_xid_errors_total): failures that follow one node call for draining it; out-of-memory exits for "
        "a smaller memory share (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static, TGI "
        "--cuda-memory-fraction) or fewer concurrent requests. A second replica keeps serving while one restarts.",
    )


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


@applies_to(TRAINING, INFERENCE)
def busy_without_reporting(facts: JobFacts) -> Finding | None:
    """Exporters see the job's GPUs busy, but the job never reported: its MFU, waterfall and findings stay unknown
    (it counts as ``unreported`` in the cluster's GPU states)."""
    if facts.reports_received != 0 or facts.status == "ended" or not facts.gpus:
        return None
    busy = _mean([g.sm_active if g.sm_active is not None else g.utilization for g in facts.gpus])
    if busy is None or busy < SM_BUSY:
        return None
    evidence: dict[str, object] = {
        "gpus": len(facts.gpus),
        "nodes": sorted({g.node for g in facts.gpus}),
        "sm_active": _round(busy),
        "tensor_active": _round(_mean([g.tensor_active for g in facts.gpus])),
        "hardware_mfu": _round(facts.hardware_mfu),
    }
    if facts.kind == INFERENCE:
        advice = (
            "The GPUs work but no serving figures arrive, so its MFU, MBU, latency and where its time goes are "
            "unknown (hardware_mfu is an estimate from tensor activity and clocks): let the exporter on its nodes read "
            "the engine's metrics (mfumon exporter --inference.list shows what it finds; --inference.url "
            "'http://HOST:PORT/metrics,job_id=JOB,model=...' names it; SGLang needs --enable-metrics), or wrap the "
            "server (mfumon wrap -- CMD), with the same job id the exporters see."
        )
    else:
        advice = (
            "The GPUs work but the job reports nothing, so its MFU and where its time goes are unknown (hardware_mfu "
            "is an estimate from tensor activity and clocks): wrap the command (mfumon wrap -- CMD) or report from "
            "the script (JobReporter, or the Lightning/Hugging Face callbacks) with the same job id the exporters see."
        )
    return Finding("busy_without_reporting", facts.total, evidence, advice)


@applies_to(TRAINING)
def tensor_cores_idle(facts: JobFacts) -> Finding | None:
    """The SMs are busy but the tensor pipes are not: small kernels, launch-bound or memory-bound work."""
    tensor = _mean([g.tensor_active for g in facts.gpus])
    busy = _mean([g.sm_active if g.sm_active is not None else g.utilization for g in facts.gpus])
    if tensor is None or busy is None or busy < SM_BUSY or tensor / busy >= TENSOR_OF_SM:
        return None
    idle_share = 1.0 - tensor / busy
    compute = facts.gpu_seconds.get("compute", 0.0)
    advice = (
        "Kernels run but do little matrix math: raise the micro-batch or pack sequences, cut launch overhead "
        "(torch.compile, CUDA graphs), use fused kernels (FlashAttention, fused optimizers and norms) and keep "
        "matmul dimensions multiples of 64; an Nsight Systems trace of a few steps shows the small kernels."
    )
    if facts.dtype == "fp32":
        advice = "fp32 matmuls skip the tensor cores: train in bf16 (torch.autocast) or allow TF32. " + advice
    return Finding(
        "tensor_cores_idle",
        compute * idle_share,
        {
            "sm_active": _round(busy),
            "tensor_active": _round(tensor),
            "tensor_share_of_sm_busy": _round(tensor / busy),
            "gpus": len(facts.gpus),
        },
        advice,
    )


@applies_to(TRAINING, INFERENCE)
def throttling(facts: JobFacts) -> Finding | None:
    """Some GPUs run below their clocks for power or heat; a synchronous job runs at its slowest GPU's pace (a serving
    replica too: its tensor-parallel ranks wait for each other at every layer). At stake: the working time (step
    time; a serving job's prefill, decode and recompute) x (1 - the slowest clock ratio)."""
    slow = [g for g in facts.gpus if g.throttled]
    if not slow:
        return None
    ratios = [g.clock_ratio for g in slow if g.clock_ratio is not None]
    slowest = min(ratios) if ratios else None
    stake = busy_gpu_seconds(facts) * (1.0 - slowest) if slowest is not None else 0.0
    named = sorted(slow, key=lambda g: (g.clock_ratio if g.clock_ratio is not None else 1.0, g.node, g.index))
    return Finding(
        "throttling",
        stake,
        {
            "throttled_gpus": [
                {**_gpu_name(g), "reasons": list(g.throttle_reasons), "clock_ratio": _round(g.clock_ratio)}
                for g in named[:_NAMED]
            ],
            "throttled": len(slow),
            "gpus": len(facts.gpus),
            "slowest_clock_ratio": _round(slowest),
        },
        (
            "A throttled GPU slows every token of its replica (its tensor-parallel ranks wait for it at every layer)"
            if facts.kind == INFERENCE
            else "Every rank waits for the slowest GPU"
        )
        + ": check cooling and power on the named nodes (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER): a power "
        "limit below the board's default (nvidia-smi -pl), blocked airflow, a failed fan. Drain the node if it keeps "
        "throttling (MfumonGPUThermalThrottling's runbook).",
    )


def _outliers(gpus: list[GpuFacts]) -> list[tuple[GpuFacts, float, str]]:
    """The GPUs whose tensor activity lies far from the job's median: (gpu, distance ÷ max, role), farthest first.

    The busiest GPU sets the pace (its kernels take longest: a lower clock, a degraded part), the others wait for
    it at every collective; a GPU idler than its peers waits on its own input (its loader, its node's link).
    """
    values = [g.tensor_active for g in gpus if g.tensor_active is not None]
    high = max(values)
    middle = median(values)
    spread = (high - min(values)) / high
    out = []
    for gpu in gpus:
        if gpu.tensor_active is None:
            continue
        distance = abs(gpu.tensor_active - middle) / high
        if distance >= spread / 2:
            out.append((gpu, distance, "sets the pace" if gpu.tensor_active > middle else "waits on its input"))
    return sorted(out, key=lambda o: (-o[1], o[0].node, o[0].index))


def _tensor_spread(gpus: tuple[GpuFacts, ...]) -> float | None:
    """(max - min) / max tensor activity over the GPUs, from their counters alone (a job that never reported)."""
    values = [g.tensor_active for g in gpus if g.tensor_active is not None]
    if len(values) < 2 or max(values) <= 0:
        return None
    return (max(values) - min(values)) / max(values)


@applies_to(TRAINING)
def stragglers(facts: JobFacts) -> Finding | None:
    """Uneven GPUs (tensor-activity spread) or uneven steps (step-time deviation); the slow nodes and GPUs named.

    Where the slow GPU's node fails a link check (InfiniBand/RoCE ports, errors, flapping) the verdict is a slow
    link; otherwise a slow rank (throttled, a failing GPU check, or its own work or input).
    """
    spread = facts.tensor_spread
    if spread is None and facts.reports_received == 0:  # seen only through its counters
        spread = _tensor_spread(facts.gpus)
    deviation = facts.step_time_deviation
    uneven = spread is not None and spread >= SPREAD
    unsteady = deviation is not None and deviation >= DEVIATION
    if not (uneven or unsteady):
        return None
    evidence: dict[str, object] = {
        "tensor_active_spread": _round(spread),
        "step_time_deviation": _round(deviation),
    }
    stake = facts.step_gpu_seconds * (deviation or 0.0) / (1.0 + (deviation or 0.0))
    verdicts: set[str] = set()
    if uneven and spread is not None:
        named = _outliers(list(facts.gpus))
        pace = [o for o in named if o[2] == "sets the pace"]
        # everyone but the pace setters waits for them for ``spread`` of their time
        waiters = (len(facts.gpus) - len(pace)) / len(facts.gpus) if pace else 1.0
        stake = max(stake, facts.step_gpu_seconds * spread * waiters)
        rows = []
        for gpu, _distance, role in named[:_NAMED]:
            link = [c for c in gpu.node_failing if c.startswith("ib_")]
            verdict = "slow link" if link else "slow rank"
            verdicts.add(verdict)
            why = link or list(gpu.failing) or list(gpu.throttle_reasons)
            rows.append(
                {
                    **_gpu_name(gpu),
                    "tensor_active": _round(gpu.tensor_active),
                    "role": role,
                    "verdict": verdict,
                    "because": why,
                }
            )
        evidence["slowest_gpus"] = rows
        evidence["slowest_nodes"] = sorted({gpu.node for gpu, _, _ in named[:_NAMED]})
    if facts.recent_step_seconds:
        evidence["recent_step_seconds"] = [_round(s) for s in facts.recent_step_seconds]
    if "slow link" in verdicts:
        advice = (
            "Slow link: the named node fails an InfiniBand/RoCE check and every collective waits on it; drain it "
            "(MfumonNodeDrain's runbook) and requeue the job without it. "
        )
    elif verdicts:
        advice = (
            "Slow rank: the named GPUs' links are healthy, so look at the rank itself: clocks and throttling, "
            "a failing GPU check, an uneven shard of the data or sequence lengths, a noisy neighbour on the node; "
            "exclude the node on the next run (sbatch --exclude) if it repeats. "
        )
    else:
        advice = "Step times vary from report to report: "
    advice += "Uneven sequence lengths call for packing or length-bucketed batches; periodic spikes for a look at "
    advice += "what runs every N steps (evaluation, logging, garbage collection: gc.freeze(), gc.disable())."
    return Finding("stragglers", stake, evidence, advice)


@applies_to(TRAINING)
def below_baseline(facts: JobFacts) -> Finding | None:
    if facts.mfu is None or not facts.baseline_mfu or facts.baseline_mfu <= 0:
        return None
    ratio = facts.mfu / facts.baseline_mfu
    if ratio >= BASELINE_FRACTION:
        return None
    return Finding(
        "below_baseline",
        facts.step_gpu_seconds * (1.0 - ratio),
        {
            "mfu": _round(facts.mfu),
            "baseline_mfu": _round(facts.baseline_mfu),
            "ratio": _round(ratio),
            "signature": facts.signature,
        },
        "The same workload ran faster before: compare this run with the baseline's (GET /v1/compare?a=JOB&b=JOB): "
        "batch size, parallelism, container, nodes. The same breakdown with slower steps points at the hardware "
        "(throttling, a power cap); more data wait or communication at storage or the network.",
    )


@applies_to(TRAINING)
def software_regression(facts: JobFacts) -> Finding | None:
    """The job runs a software version after which jobs of its signature reach a lower MFU (issue 59): the largest."""
    if not facts.regressions:
        return None
    worst = min(facts.regressions, key=lambda r: r.relative_change)
    evidence: dict[str, object] = {
        "component": worst.component,
        "from_version": worst.before,
        "to_version": worst.after,
        "mfu_change": _round(worst.relative_change),
        "confidence": _round(worst.confidence),
        "signature": facts.signature,
    }
    if worst.also_changed:
        evidence["also_changed"] = "; ".join(worst.also_changed)
    advice = (
        f"Jobs of this workload on {worst.component} {worst.after} reach {abs(worst.relative_change):.0%} less MFU "
        f"than on {worst.before}. "
    )
    if worst.also_changed:
        advice += (
            "Other components changed at the same time, so which one costs it is not settled: change one at a time. "
        )
    advice += "Roll the component back for this workload, or see GET /v1/regressions for the jobs and intervals."
    return Finding("software_regression", facts.step_gpu_seconds * abs(worst.relative_change), evidence, advice)


@applies_to(TRAINING, INFERENCE)
def accounting_suspect(facts: JobFacts) -> Finding | None:
    """The reported MFU disagrees with the tensor work the GPUs executed: the numbers above may mislead."""
    if facts.accounting_verdict not in ("over_claims", "under_claims"):
        return None
    agreement = facts.agreement
    serving = facts.kind == INFERENCE
    compute = busy_gpu_seconds(facts) if serving else facts.gpu_seconds.get("compute", 0.0)
    stake = compute * min(1.0, abs(1.0 - agreement)) if agreement is not None else compute
    advice = facts.accounting_message or "The reported MFU and the hardware estimate disagree: check the job's report."
    if serving and facts.accounting_verdict == "under_claims":
        advice = _SERVING_UNDER_CLAIMS
    return Finding(
        "mfu_accounting_suspect",
        stake,
        {
            "verdict": facts.accounting_verdict,
            "reported_mfu": _round(facts.mfu),
            "hardware_mfu": _round(facts.hardware_mfu),
            "agreement": _round(agreement),
            "bounds": [AGREEMENT_UNDER_CLAIM, AGREEMENT_OVER_CLAIM],
        },
        advice,
    )


_SERVING_UNDER_CLAIMS = (
    "The GPUs execute more tensor work than the model FLOPs counted for the tokens served: look for work a serving "
    "count leaves out: attention over long contexts (give model.layers, heads and head_dim so that ours counts it), "
    "speculative decoding's draft and rejected tokens, requests recomputed after a preemption; or a reported dtype "
    "whose dense peak is higher than that of the matmuls that run (fp8 reported for bf16 matmuls)."
)


RULES: tuple[Rule, ...] = (
    busy_without_reporting,
    exposed_communication,
    data_loading,
    pipeline_bubbles,
    tensor_cores_idle,
    throttling,
    stragglers,
    *PEER_RULES,
    checkpoint_overhead,
    failures,
    slow_startup,
    stalled,
    below_baseline,
    software_regression,
    *COLLECTIVE_RULES,
    accounting_suspect,
    *PROFILE_RULES,
    *SERVING_RULES,
)


def diagnose(facts: JobFacts, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Every finding of the rules that apply to the job's kind, most GPU-seconds at stake first (rule order breaks
    ties)."""
    found = [f for f in (rule(facts) for rule in rules if rule.applies(facts.kind)) if f is not None]
    return sorted(found, key=lambda f: -f.gpu_seconds)
