"""The clock and power straggler (``mfumon.api.diagnosis.peers``): a busy GPU whose SM clock or power sits well below
its peers' under the same load, with the evidence; and GPUs that differ for a reason (load, model, idling) do not."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mfumon.api.diagnosis import GpuFacts, JobFacts, diagnose
from mfumon.api.diagnosis import peers as p
from mfumon.api.diagnosis import rules as r

PARTS = {"init": 100.0, "compute": 9000.0, "comm_exposed": 500.0}
CLOCK, MAX_CLOCK, POWER = 1.98e9, 1.98e9, 650.0


def gpu(i: int, **overrides: Any) -> GpuFacts:
    base: dict[str, Any] = {
        "node": f"n{i // 4}",
        "index": i % 4,
        "uuid": f"GPU-{i}",
        "utilization": 1.0,
        "sm_active": 0.8,
        "sm_clock_hz": CLOCK,
        "max_sm_clock_hz": MAX_CLOCK,
        "power_watts": POWER,
    }
    return GpuFacts(**(base | overrides))


def job(*odd: GpuFacts, n: int = 8) -> JobFacts:
    """``n`` GPUs in lockstep, the ``odd`` ones replacing those of their uuid."""
    by_uuid = {g.uuid: g for g in odd}
    gpus = tuple(by_uuid.get(f"GPU-{i}", gpu(i)) for i in range(n))
    return JobFacts(job_id="j", gpu_seconds=dict(PARTS), gpus=gpus)


def test_a_gpu_clocked_below_its_peers_is_named_with_the_evidence() -> None:
    facts = job(gpu(5, sm_clock_hz=1.5e9, throttle_reasons=("sw_power_cap",)))
    finding = p.clock_power_stragglers(facts)
    assert finding is not None and finding.cause == "clock_power_straggler"
    (row,) = finding.evidence["stragglers"]
    assert (row["node"], row["gpu"], row["uuid"], row["below"]) == ("n1", 1, "GPU-5", ["clock"])
    assert (row["sm_clock_hz"], row["peers_median_sm_clock_hz"]) == (1.5e9, CLOCK)
    assert row["clock_ratio"] == pytest.approx(1.5 / 1.98, abs=1e-4)
    assert (row["power_watts"], row["peers_median_power_watts"], row["power_ratio"]) == (POWER, POWER, 1.0)
    assert (row["peers"], row["load"], row["because"]) == (7, 0.8, ["sw_power_cap"])
    assert finding.evidence["busy_gpus"] == 8 and finding.evidence["straggling"] == 1
    assert finding.gpu_seconds == pytest.approx(facts.step_gpu_seconds * (1 - 1.5 / 1.98))


def test_a_gpu_drawing_less_power_at_the_same_clock_and_load_is_named() -> None:
    facts = job(gpu(2, power_watts=450.0))
    finding = p.clock_power_stragglers(facts)
    assert finding is not None
    (row,) = finding.evidence["stragglers"]
    assert (row["uuid"], row["below"], row["clock_ratio"]) == ("GPU-2", ["power"], 1.0)
    assert row["power_ratio"] == pytest.approx(450 / 650, abs=1e-4)
    assert finding.gpu_seconds == pytest.approx(facts.step_gpu_seconds * (1 - 450 / 650))


def test_both_below_cost_the_clock_deficit_and_the_worst_comes_first() -> None:
    facts = job(gpu(1, sm_clock_hz=1.6e9, power_watts=400.0), gpu(6, sm_clock_hz=1.2e9))
    finding = p.clock_power_stragglers(facts)
    assert finding is not None
    first, second = finding.evidence["stragglers"]
    assert (first["uuid"], second["uuid"]) == ("GPU-6", "GPU-1")
    assert second["below"] == ["clock", "power"]
    assert finding.evidence["largest_deficit"] == pytest.approx(1 - 1.2 / 1.98, abs=1e-4)
    # the median of the peers, not their mean: one slow GPU does not lower the bar for the other
    assert first["peers_median_sm_clock_hz"] == CLOCK and second["peers_median_sm_clock_hz"] == CLOCK


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(gpu(3, sm_clock_hz=0.86 * CLOCK, power_watts=0.81 * POWER), id="within-tolerance"),
        pytest.param(gpu(3, sm_active=0.6, sm_clock_hz=1.2e9, power_watts=300.0), id="lighter-load-explains-it"),
        pytest.param(gpu(3, sm_clock_hz=None, power_watts=None), id="not-reported"),
    ],
)
def test_no_straggler(odd: GpuFacts) -> None:
    assert p.clock_power_stragglers(job(odd)) is None


def test_idle_gpus_are_not_judged() -> None:
    idle = [
        gpu(i, utilization=0.0, sm_active=0.05, sm_clock_hz=0.3e9 * (1 + i), power_watts=70.0 + i) for i in range(8)
    ]
    assert p.clock_power_stragglers(job(*idle)) is None


def test_utilization_is_the_load_without_sm_activity() -> None:
    gpus = [gpu(i, sm_active=None, utilization=0.95) for i in range(8)]
    gpus[4] = gpu(4, sm_active=None, utilization=0.95, sm_clock_hz=1.4e9)
    finding = p.clock_power_stragglers(job(*gpus))
    assert finding is not None and [row["uuid"] for row in finding.evidence["stragglers"]] == ["GPU-4"]


def test_without_enough_peers_there_is_no_reference() -> None:
    assert p.clock_power_stragglers(job(gpu(1, sm_clock_hz=1.2e9), n=2)) is None
    assert p.clock_power_stragglers(job(gpu(1, sm_clock_hz=1.2e9), n=3)) is not None


def test_gpus_of_another_model_are_not_peers() -> None:
    """Four GPUs whose max clock is lower run slower by design, not by fault."""
    other = [gpu(i, sm_clock_hz=1.41e9, max_sm_clock_hz=1.41e9, power_watts=400.0) for i in range(4, 8)]
    assert p.clock_power_stragglers(job(*other)) is None


def test_the_rule_runs_in_the_diagnosis() -> None:
    assert p.clock_power_stragglers in r.RULES
    facts = replace(job(gpu(0, sm_clock_hz=1.0e9)), tensor_spread=0.0)
    assert "clock_power_straggler" in [f.cause for f in diagnose(facts)]
