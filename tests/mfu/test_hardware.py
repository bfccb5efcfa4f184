"""The hardware estimate (tensor activity x clock factor) and the verdict on a report checked against it.

Each test sits on a boundary: a clock above its maximum, an estimate of exactly 0, a ratio at and just past each
agreement threshold, a missing side of the comparison.
"""

from __future__ import annotations

import pytest

from mfumon.mfu import (
    AGREEMENT_OVER_CLAIM,
    AGREEMENT_UNDER_CLAIM,
    AccountingCheck,
    agreement_ratio,
    check_accounting,
    hardware_mfu,
)


def test_thresholds() -> None:
    assert (AGREEMENT_UNDER_CLAIM, AGREEMENT_OVER_CLAIM) == (0.5, 1.2)


def test_no_tensor_counter_gives_no_estimate() -> None:
    assert hardware_mfu(None, 1000e6, 2000e6) is None


@pytest.mark.parametrize(
    ("sm_clock_hz", "max_sm_clock_hz"),
    [(None, 2000e6), (1000e6, None), (1000e6, 0.0), (1000e6, -1.0), (None, None)],
)
def test_without_both_clocks_the_estimate_is_tensor_activity(
    sm_clock_hz: float | None, max_sm_clock_hz: float | None
) -> None:
    estimate = hardware_mfu(1, sm_clock_hz, max_sm_clock_hz)
    assert estimate == 1.0 and type(estimate) is float


def test_clock_factor_scales_tensor_activity() -> None:
    # 0.5 busy at 1000 of 2000 MHz: half the peak's work per busy cycle.
    estimate = hardware_mfu(1, 1000e6, 2000e6)
    assert estimate == 0.5 and type(estimate) is float
    assert hardware_mfu(0.5, 1000e6, 2000e6) == 0.25
    assert hardware_mfu(1, 0.25, 0.5) == 0.5  # the factor is a ratio: any unit, any scale


def test_clock_above_its_maximum_is_capped_at_a_factor_of_one() -> None:
    # A boost reading past the table's maximum (2100 of 2000 MHz) must not lift the estimate above tensor activity.
    assert hardware_mfu(0.5, 2100e6, 2000e6) == 0.5
    assert hardware_mfu(0.5, 2000e6, 2000e6) == 0.5


def test_agreement_ratio() -> None:
    assert agreement_ratio(0.3, 0.6) == 0.5
    assert agreement_ratio(None, 0.6) is None
    assert agreement_ratio(0.3, None) is None
    assert agreement_ratio(0.3, 0.0) is None  # tensor pipes idle: no ratio, not a division by zero
    assert agreement_ratio(0.3, -0.1) is None


def test_fp32_is_never_checked() -> None:
    assert check_accounting(0.3, 0.4, dtype="fp32", recompute=None) == AccountingCheck(
        "unchecked", "fp32 matmuls run outside the tensor pipes: no hardware estimate applies"
    )


def test_no_estimate_is_unchecked() -> None:
    assert check_accounting(0.3, None, dtype="bf16", recompute=None) == AccountingCheck(
        "unchecked",
        "no hardware counter: no exporter attributes GPUs with tensor-activity counters to this job (AMD "
        "Instinct GPUs read through amdsmi have none), so the reported MFU stands alone",
    )


def test_missing_mfu_beside_an_estimate_is_unchecked() -> None:
    assert check_accounting(None, 0.4, dtype="bf16", recompute=None) == AccountingCheck(
        "unchecked", "the job's MFU is unknown, so there is nothing to compare"
    )


def test_an_estimate_of_exactly_zero_is_an_over_claim() -> None:
    assert check_accounting(0.3, 0.0, dtype="bf16", recompute=None) == AccountingCheck(
        "over_claims",
        "the job reports 30% MFU but its GPUs' tensor pipes were idle: check that the attributed GPUs are the ones "
        "the job runs on, and the reported model and throughput",
    )


def test_just_above_the_over_claim_threshold() -> None:
    # 0.61 / 0.5 = 1.22 > 1.2
    assert check_accounting(0.61, 0.5, dtype="bf16", recompute=None) == AccountingCheck(
        "over_claims",
        "the job claims 1.22x the model FLOPs its tensor cores executed (61% reported MFU, 50% from the hardware): "
        "check the reported model size (params, active_params for MoE), seq_len, num_gpus (whole job, not per node) "
        "and tokens per second (whole job, not per GPU), and the dtype: a job that reports bf16 but runs fp8 matmuls "
        "does twice the FLOPs per tensor-pipe cycle",
    )


@pytest.mark.parametrize(("reported", "words"), [(0.6, "(60%) is 1.20x"), (0.59, "(59%) is 1.18x")])
def test_at_and_just_below_the_over_claim_threshold_is_consistent(reported: float, words: str) -> None:
    assert check_accounting(reported, 0.5, dtype="bf16", recompute=None) == AccountingCheck(
        "consistent", f"the reported MFU {words} the hardware estimate (50%), within 0.5-1.2"
    )


def test_at_the_under_claim_threshold_is_consistent() -> None:
    assert check_accounting(0.25, 0.5, dtype="bf16", recompute=None) == AccountingCheck(
        "consistent", "the reported MFU (25%) is 0.50x the hardware estimate (50%), within 0.5-1.2"
    )


def test_just_below_the_under_claim_threshold_hints_at_undeclared_recompute() -> None:
    assert check_accounting(0.24, 0.5, dtype="fp8", recompute=False) == AccountingCheck(
        "under_claims",
        "the job's model FLOPs are only 0.48x of the tensor work executed (24% reported MFU, 50% from the hardware): "
        "look for uncounted work or activation recompute the report does not declare (recompute_activations), "
        "a reported dtype (fp8) whose dense peak is higher than that of the matmuls that run (fp8 reported for bf16 "
        "matmuls, bf16 for tf32), or a FLOPs formula that misses part of the model (flops_per_token overrides it)",
    )


def test_an_under_claim_with_declared_recompute_does_not_suggest_it() -> None:
    assert check_accounting(0.24, 0.5, dtype="bf16", recompute=True) == AccountingCheck(
        "under_claims",
        "the job's model FLOPs are only 0.48x of the tensor work executed (24% reported MFU, 50% from the hardware): "
        "look for uncounted work, a reported dtype (bf16) whose dense peak is higher than that of the matmuls that "
        "run (fp8 reported for bf16 matmuls, bf16 for tf32), or a FLOPs formula that misses part of the model "
        "(flops_per_token overrides it)",
    )
