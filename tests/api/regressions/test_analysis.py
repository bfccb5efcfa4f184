"""Regressions across software changes on made-up fleets: a clean regression, an improvement, a confounded change, too
few jobs to tell, and a noisy signature where a small drop must not be called."""

from __future__ import annotations

import pytest

from mfumon.api.regressions.analysis import JobRun, find_changes

BASE = {"python": "3.11.7", "pytorch": "2.5.1", "nccl": "2.21.5", "driver": "550.54.15"}


def runs(
    mfus: list[float], *, start: float = 0.0, signature: str = "training|llama3-8b|h100-sxm|8|bf16", **software: str
) -> list[JobRun]:
    return [
        JobRun(f"{signature[-12:]}-{start + i:g}", signature, start + i, mfu, 10.0, {**BASE, **software}, 1.0 + i / 100)
        for i, mfu in enumerate(mfus)
    ]


def the(changes: list, component: str) -> object:
    (found,) = [c for c in changes if c.component == component]
    return found


def test_a_clean_nccl_regression_is_named_with_its_versions_and_intervals() -> None:
    before = runs([0.400, 0.402, 0.398, 0.401, 0.399])
    after = runs([0.376, 0.377, 0.375, 0.378, 0.374], start=100, nccl="2.23.4")
    change = the(find_changes(before + after), "nccl")
    assert (change.before, change.after, change.verdict) == ("2.21.5", "2.23.4", "regression")
    assert change.relative_change == pytest.approx(-0.06, abs=0.002)
    assert change.mfu_before.low < 0.40 < change.mfu_before.high and change.mfu_after.high < change.mfu_before.low
    assert change.confidence > 0.99 and not change.confounded
    assert len(change.jobs_after) == 5 and change.gpu_hours_after == 50.0
    assert change.noise == pytest.approx(change.mfu_before.spread / change.mfu_before.mean)


def test_an_improvement() -> None:
    changes = find_changes(runs([0.30, 0.31, 0.30, 0.29]) + runs([0.33, 0.34, 0.33, 0.34], start=50, pytorch="2.6.0"))
    assert the(changes, "pytorch").verdict == "improvement"


def test_a_driver_upgrade_that_costs_nothing_is_no_change() -> None:
    changes = find_changes(
        runs([0.40, 0.41, 0.39, 0.40]) + runs([0.40, 0.39, 0.41, 0.40], start=50, driver="560.35.03")
    )
    assert the(changes, "driver").verdict == "no_change"


def test_two_components_at_once_are_reported_as_confounded() -> None:
    before = runs([0.400, 0.402, 0.398, 0.401])
    after = runs([0.370, 0.372, 0.368, 0.371], start=100, nccl="2.23.4", pytorch="2.6.0")
    changes = find_changes(before + after)
    for component, other in (("nccl", "pytorch"), ("pytorch", "nccl")):
        change = the(changes, component)
        assert change.verdict == "regression" and change.confounded
        assert [(a.component, a.before, a.after) for a in change.also_changed] == [
            (other, BASE[other], "2.6.0" if other == "pytorch" else "2.23.4")
        ]


def test_too_few_jobs_to_tell_says_so() -> None:
    change = the(find_changes(runs([0.40, 0.41, 0.40]) + runs([0.30, 0.31], start=9, nccl="2.23.4")), "nccl")
    assert change.verdict == "too_few_jobs" and change.p_value is None and len(change.jobs_after) == 2


def test_a_small_drop_in_a_noisy_signature_is_not_called() -> None:
    noisy = [0.30, 0.45, 0.36, 0.52, 0.33, 0.41]  # a spread of 0.08 around 0.40
    after = [0.29, 0.43, 0.35, 0.50, 0.32, 0.40]  # 2.5 % lower
    change = the(find_changes(runs(noisy) + runs(after, start=50, nccl="2.23.4")), "nccl")
    assert change.verdict == "no_change" and change.p_value > 0.01 and change.noise > 0.15


def test_signatures_are_compared_apart_and_instances_are_not_components() -> None:
    a = runs([0.40, 0.40, 0.40], signature="sig-a") + runs(
        [0.30, 0.30, 0.30], start=5, signature="sig-a", nccl="2.23.4"
    )
    b = runs([0.20, 0.21, 0.20], signature="sig-b", container_id="abc") + runs(
        [0.21, 0.20, 0.20], start=5, signature="sig-b", container_id="def"
    )
    changes = find_changes(a + b)
    assert [(c.signature, c.component, c.verdict) for c in changes] == [("sig-a", "nccl", "regression")]
