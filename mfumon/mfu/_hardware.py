"""Hardware-estimated MFU: how busy the tensor pipes were, from GPU counters alone; and a report checked against it.

    estimate = tensor_active x sm_clock / max_sm_clock        (the clock factor only where both clocks are known)

``tensor_active`` (NVML GPM ``ANY_TENSOR_UTIL``, DCGM ``PROF_PIPE_TENSOR_ACTIVE``) is the fraction of cycles the
tensor pipes were busy. A dense peak assumes every cycle busy at the maximum SM clock, so a GPU held at 1425 of
1980 MHz by its power cap does only 0.72 of the peak's work per busy cycle: the clock factor turns pipe activity
into a fraction of the dense peak. Calibrated on an NVIDIA H200 (driver 580.159.04; ``bench/gpu_probe.py``,
``bench/results/h200-2026-11-30/calibration.json``) with matmuls of known FLOP rate timed by CUDA events, the
estimate matched achieved ÷ dense peak of the dtype being run within 1-3 %: bf16 8192³ 0.674 vs 0.661 (tensor
active 0.936 at 1425/1980 MHz), bf16 at half duty 0.377 vs 0.381, bf16 2048³ 0.638 vs 0.622, fp8 0.604 vs 0.595
(against the fp8 peak), tf32 0.688 vs 0.682 (against the tf32 peak); without the clock factor it overstated by ~1.4x
under the power cap. A memory-bound elementwise kernel showed SM active 0.99 and tensor active 0.00.

What the estimate is: tensor work executed (activation recompute included, so closer to HFU than to MFU), relative
to the dense peak of whatever dtype the pipes ran. Where it is wrong: a job that reports bf16 but runs fp8 matmuls
does twice the FLOPs per busy cycle (its estimate reads half its true bf16-relative rate); 2:4 sparse matmuls do
twice the dense FLOPs per busy cycle; FLOPs outside the tensor pipes (fp32 without TF32, elementwise, softmax) are
invisible. A GPU without tensor counters (no GPM, no DCGM profiling) gives no estimate, never 0.

Two sources of ``tensor_active``, one formula; a GPU view says which it used (:func:`estimate_source`):

- ``cycle_counters``: DCGM 4.6+ keeps raw monotonic counters, ``DCGM_FI_PROF_MMA_CYCLES_ACTIVE_TOTAL`` (1086, "Raw
  monotonic counter of GPU SM MMA (any tensor) cycles active") and ``DCGM_FI_PROF_SM_CYCLES_ELAPSED_TOTAL`` (1084).
  The exporter sends their differences' ratio over the push interval, tensor cycles ÷ elapsed cycles, and
  ``tensor_active_exact`` = 1: every cycle of the interval counted, no sampling gap. Only the clock factor is still
  sampled (the SM clock now, against its maximum).
- ``ratio_clock``: every other source (GPM ``ANY_TENSOR_UTIL``, DCGM ``PROF_PIPE_TENSOR_ACTIVE``) samples the ratio
  over a window of its own, which can miss bursts between samples; the estimate is that sampled ratio x the sampled
  clock factor.

A job's estimate is the mean over its GPUs; its source is ``cycle_counters`` or ``ratio_clock`` when every one of
those GPUs used that source, else ``mixed`` (:func:`job_estimate_source`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

#: Where one GPU's estimate came from: exact cycle-counter differences, or a sampled ratio (see the module docstring).
EstimateSource = Literal["cycle_counters", "ratio_clock"]
#: Where a job's estimate came from: one source for all its GPUs, or ``mixed``.
JobEstimateSource = Literal["cycle_counters", "ratio_clock", "mixed"]
CYCLE_COUNTERS: Final = "cycle_counters"
RATIO_CLOCK: Final = "ratio_clock"
MIXED: Final = "mixed"

#: Reported ÷ hardware MFU above this claims clearly more model FLOPs than the tensor pipes executed: the estimate
#: was within +3 % of the truth on every calibrated matmul and counts recompute on top, so an honest report sits at or
#: below ~1.0; 1.2 leaves room for calibration error and for reports and GPU samples covering different moments.
AGREEMENT_OVER_CLAIM = 1.2
#: Below this, under half of the executed tensor work is counted as model FLOPs. Full activation recompute alone
#: explains 6/8 = 0.75; 0.5 means more than that (a dtype whose peak is twice the one reported, a missed term).
AGREEMENT_UNDER_CLAIM = 0.5


def hardware_mfu(
    tensor_active: float | None, sm_clock_hz: float | None = None, max_sm_clock_hz: float | None = None
) -> float | None:
    """One GPU's estimate (0-1), or None without a tensor-activity counter."""
    if tensor_active is None:
        return None
    if sm_clock_hz is None or max_sm_clock_hz is None or max_sm_clock_hz <= 0:
        return float(tensor_active)
    return float(tensor_active) * min(sm_clock_hz / max_sm_clock_hz, 1.0)


def estimate_source(tensor_active_exact: int | None) -> EstimateSource:
    """The source of a GPU's estimate: ``cycle_counters`` when the exporter flags ``tensor_active`` exact."""
    return CYCLE_COUNTERS if tensor_active_exact else RATIO_CLOCK


def job_estimate_source(estimated: int, from_cycle_counters: int) -> JobEstimateSource | None:
    """The source of a mean over ``estimated`` GPU estimates, ``from_cycle_counters`` of them exact; None without
    any estimate."""
    if not estimated:
        return None
    if from_cycle_counters == estimated:
        return CYCLE_COUNTERS
    return RATIO_CLOCK if from_cycle_counters == 0 else MIXED


def agreement_ratio(reported_mfu: float | None, estimate: float | None) -> float | None:
    """Reported MFU ÷ hardware-estimated MFU; None when either is unknown or the tensor pipes did nothing."""
    if reported_mfu is None or estimate is None or estimate <= 0:
        return None
    return reported_mfu / estimate


@dataclass(frozen=True, slots=True)
class AccountingCheck:
    """The verdict on a job's reported MFU against its hardware estimate, in words an ML engineer acts on."""

    verdict: str  # consistent | over_claims | under_claims | unchecked
    message: str


def check_accounting(
    reported_mfu: float | None, estimate: float | None, *, dtype: str, recompute: bool | None
) -> AccountingCheck:
    """Compare a reported MFU with the hardware estimate of the same job."""
    if dtype == "fp32":
        return AccountingCheck("unchecked", "fp32 matmuls run outside the tensor pipes: no hardware estimate applies")
    if estimate is None:
        return AccountingCheck(
            "unchecked",
            "no hardware counter: no exporter attributes GPUs with tensor-activity counters to this job (AMD "
            "Instinct GPUs read through amdsmi have none), so the reported MFU stands alone",
        )
    if reported_mfu is None:
        return AccountingCheck("unchecked", "the job's MFU is unknown, so there is nothing to compare")
    ratio = agreement_ratio(reported_mfu, estimate)
    if ratio is None:
        return AccountingCheck(
            "over_claims",
            f"the job reports {reported_mfu:.0%} MFU but its GPUs' tensor pipes were idle: check that the "
            "attributed GPUs are the ones the job runs on, and the reported model and throughput",
        )
    if ratio > AGREEMENT_OVER_CLAIM:
        return AccountingCheck(
            "over_claims",
            f"the job claims {ratio:.2f}x the model FLOPs its tensor cores executed ({reported_mfu:.0%} reported MFU, "
            f"{estimate:.0%} from the hardware): check the reported model size (params, active_params for MoE), "
            "seq_len, num_gpus (whole job, not per node) and tokens per second (whole job, not per GPU), and the "
            f"dtype: a job that reports {dtype} but runs fp8 matmuls does twice the FLOPs per tensor-pipe cycle",
        )
    if ratio < AGREEMENT_UNDER_CLAIM:
        hint = "," if recompute else " or activation recompute the report does not declare (recompute_activations),"
        return AccountingCheck(
            "under_claims",
            f"the job's model FLOPs are only {ratio:.2f}x of the tensor work executed ({reported_mfu:.0%} reported "
            f"MFU, {estimate:.0%} from the hardware): look for uncounted work{hint} a reported dtype ({dtype}) whose "
            "dense peak is higher than that of the matmuls that run (fp8 reported for bf16 matmuls, bf16 for tf32), "
            "or a FLOPs formula that misses part of the model (flops_per_token overrides it)",
        )
    return AccountingCheck(
        "consistent",
        f"the reported MFU ({reported_mfu:.0%}) is {ratio:.2f}x the hardware estimate ({estimate:.0%}), within "
        f"{AGREEMENT_UNDER_CLAIM}-{AGREEMENT_OVER_CLAIM}",
    )
