"""Each diagnosis rule on facts that should make it fire and on facts that should not; the ranking."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mfumon.api.diagnosis import GpuFacts, JobFacts, diagnose
from mfumon.api.diagnosis import rules as r
from mfumon.api.diagnosis.facts import RegressionFact

HEALTHY = {"init": 100.0, "checkpoint": 100.0, "data_wait": 200.0, "comm_exposed": 500.0, "compute": 9100.0}


def facts(**overrides: Any) -> JobFacts:
    base: dict[str, Any] = {"job_id": "j", "gpu_seconds": dict(HEALTHY), "dtype": "bf16"}
    return JobFacts(**(base | overrides))


def gpus(tensor: list[float], **overrides: Any) -> tuple[GpuFacts, ...]:
    return tuple(
        GpuFacts(node=f"n{i // 4}", index=i % 4, uuid=f"GPU-{i}", sm_active=0.8, tensor_active=t, **overrides)
        for i, t in enumerate(tensor)
    )


def with_parts(**parts: float) -> JobFacts:
    return facts(gpu_seconds=HEALTHY | parts)


def test_a_healthy_job_has_no_findings() -> None:
    healthy = facts(gpus=gpus([0.45] * 8), mfu=0.4, baseline_mfu=0.42, step_time_deviation=0.02, tensor_spread=0.0)
    assert diagnose(healthy) == []


@pytest.mark.parametrize(
    ("rule", "category", "cause", "fires", "quiet"),
    [
        (r.exposed_communication, "comm_exposed", "exposed_communication", 2000.0, 500.0),
        (r.data_loading, "data_wait", "data_loading", 1000.0, 200.0),
        (r.pipeline_bubbles, "bubble", "pipeline_bubbles", 1000.0, 100.0),
        (r.checkpoint_overhead, "checkpoint", "checkpoint_overhead", 1500.0, 100.0),
        (r.slow_startup, "init", "slow_startup", 1500.0, 100.0),
        (r.stalled, "stalled", "stalled", 1500.0, 100.0),
    ],
)
def test_waterfall_parts_past_their_share_are_named_with_their_gpu_seconds(
    rule: r.Rule, category: str, cause: str, fires: float, quiet: float
) -> None:
    finding = rule(with_parts(**{category: fires}))
    assert finding is not None and finding.cause == cause
    assert finding.gpu_seconds == fires
    assert finding.evidence["gpu_seconds"] == fires
    assert 0 < finding.evidence["share_of_allocated"] < 1
    assert rule(with_parts(**{category: quiet})) is None
    assert rule(facts(gpu_seconds={})) is None  # nothing allocated yet


def test_step_parts_are_judged_against_step_time_not_the_whole_allocation() -> None:
    # 600 of 1200 GPU-s of step time is exposed communication, though only 6% of the allocation
    job = facts(gpu_seconds={"stalled": 8800.0, "comm_exposed": 600.0, "compute": 600.0})
    finding = r.exposed_communication(job)
    assert finding is not None and finding.evidence["share_of_step_time"] == 0.5


def test_checkpoint_overhead_reports_the_saves() -> None:
    finding = r.checkpoint_overhead(
        replace(with_parts(checkpoint=1500.0), checkpoint_saves=5, checkpoint_save_seconds=37.5)
    )
    assert finding is not None and finding.evidence["saves"] == 5 and finding.evidence["mean_save_seconds"] == 37.5


def test_repeated_failures_count_lost_work_and_reinit() -> None:
    job = replace(with_parts(lost=300.0, init=400.0), failures=3, restarts=3, exit_codes=(137, 137, 1))
    finding = r.failures(job)
    assert finding is not None and finding.cause == "repeated_failures"
    assert finding.gpu_seconds == pytest.approx(300.0 + 400.0 * 3 / 4)
    assert finding.evidence["exit_codes"] == [137, 137, 1]
    assert "drain" in finding.advice
    single = r.failures(replace(with_parts(lost=1500.0), failures=1, restarts=1))
    assert single is not None and single.cause == "lost_progress"
    assert r.failures(replace(with_parts(lost=100.0), failures=1, restarts=1)) is None


def test_tensor_cores_idle_when_sms_are_busy_and_tensor_pipes_are_not() -> None:
    finding = r.tensor_cores_idle(facts(gpus=gpus([0.1] * 4)))  # 0.1 of 0.8 busy
    assert finding is not None
    assert finding.gpu_seconds == pytest.approx(9100.0 * (1 - 0.125))
    assert finding.evidence["tensor_share_of_sm_busy"] == 0.125
    assert "bf16" not in finding.advice
    fp32 = r.tensor_cores_idle(facts(gpus=gpus([0.1] * 4), dtype="fp32"))
    assert fp32 is not None and "TF32" in fp32.advice
    assert r.tensor_cores_idle(facts(gpus=gpus([0.45] * 4))) is None
    idle_sms = tuple(replace(g, sm_active=0.2) for g in gpus([0.01] * 4))  # stalled, not busy: not this cause
    assert r.tensor_cores_idle(facts(gpus=idle_sms)) is None
    assert r.tensor_cores_idle(facts(gpus=())) is None  # no exporter counters: nothing to say


def test_throttling_names_the_slow_gpus_and_costs_the_pace_of_the_slowest() -> None:
    slow = replace(gpus([0.5])[0], throttle_reasons=("hw_thermal",), sm_clock_hz=1.2e9, max_sm_clock_hz=1.98e9)
    job = facts(gpus=(*gpus([0.45] * 3), replace(slow, index=3)))
    finding = r.throttling(job)
    assert finding is not None
    assert finding.evidence["throttled_gpus"] == [
        {"node": "n0", "gpu": 3, "uuid": "GPU-0", "reasons": ["hw_thermal"], "clock_ratio": round(1.2 / 1.98, 4)}
    ]
    assert finding.gpu_seconds == pytest.approx(job.step_gpu_seconds * (1 - 1.2 / 1.98))
    assert r.throttling(facts(gpus=gpus([0.45] * 4))) is None


def test_stragglers_name_the_pace_setter_and_call_a_healthy_one_a_slow_rank() -> None:
    tensor = [0.3] * 7 + [0.6]  # GPU 3 of n1 computes twice as long as its peers: everyone waits for it
    job = facts(gpus=gpus(tensor), tensor_spread=0.5)
    finding = r.stragglers(job)
    assert finding is not None and finding.cause == "stragglers"
    (slowest,) = finding.evidence["slowest_gpus"]
    assert (slowest["node"], slowest["gpu"], slowest["role"], slowest["verdict"]) == (
        "n1",
        3,
        "sets the pace",
        "slow rank",
    )
    assert finding.evidence["slowest_nodes"] == ["n1"]
    assert finding.gpu_seconds == pytest.approx(job.step_gpu_seconds * 0.5 * 7 / 8)
    assert "Slow rank" in finding.advice


def test_stragglers_say_slow_link_when_the_slow_node_fails_a_link_check() -> None:
    tensor = [0.45] * 7 + [0.1]  # one GPU waits on its own input, and its node's InfiniBand port is down
    linked = tuple(replace(g, node_failing=("ib_ports_active",)) if g.node == "n1" else g for g in gpus(tensor))
    finding = r.stragglers(facts(gpus=linked, tensor_spread=(0.45 - 0.1) / 0.45))
    assert finding is not None
    (slowest,) = finding.evidence["slowest_gpus"]
    assert (slowest["node"], slowest["role"], slowest["verdict"]) == ("n1", "waits on its input", "slow link")
    assert slowest["because"] == ["ib_ports_active"]
    assert finding.advice.startswith("Slow link")


def test_stragglers_from_step_time_deviation_alone() -> None:
    job = facts(step_time_deviation=0.3, recent_step_seconds=(1.0, 1.0, 1.6, 1.0, 0.7))
    finding = r.stragglers(job)
    assert finding is not None and "slowest_gpus" not in finding.evidence
    assert finding.gpu_seconds == pytest.approx(job.step_gpu_seconds * 0.3 / 1.3)
    assert r.stragglers(facts(step_time_deviation=0.1, tensor_spread=0.1, gpus=gpus([0.45, 0.5]))) is None


def test_below_baseline() -> None:
    job = facts(mfu=0.3, baseline_mfu=0.45, signature="sig")
    finding = r.below_baseline(job)
    assert finding is not None and finding.evidence["ratio"] == pytest.approx(0.6667, abs=1e-4)
    assert finding.gpu_seconds == pytest.approx(job.step_gpu_seconds / 3)
    assert r.below_baseline(facts(mfu=0.4, baseline_mfu=0.45)) is None
    assert r.below_baseline(facts(mfu=0.3)) is None


def test_accounting_suspect_carries_the_check_message() -> None:
    job = facts(
        accounting_verdict="over_claims", accounting_message="check params", agreement=1.6, mfu=0.5, hardware_mfu=0.31
    )
    finding = r.accounting_suspect(job)
    assert finding is not None and finding.advice == "check params"
    assert finding.gpu_seconds == pytest.approx(9100.0 * 0.6)
    assert r.accounting_suspect(facts(accounting_verdict="consistent", agreement=1.0)) is None
    assert r.accounting_suspect(facts(accounting_verdict="unchecked")) is None


def test_findings_are_ranked_by_gpu_seconds_at_stake() -> None:
    job = replace(with_parts(comm_exposed=3000.0, data_wait=1000.0, checkpoint=2000.0), mfu=0.2, baseline_mfu=0.4)
    causes = [(f.cause, f.gpu_seconds) for f in diagnose(job)]
    assert [c for c, _ in causes] == ["below_baseline", "exposed_communication", "checkpoint_overhead", "data_loading"]
    assert [s for _, s in causes] == sorted((s for _, s in causes), reverse=True)


def test_software_regression_names_the_change_and_what_else_changed() -> None:
    clean = RegressionFact("nccl", "2.21.5", "2.23.4", -0.06, 0.9999)
    small = RegressionFact("driver", "550.54.15", "560.35.03", -0.03, 0.995, ("cuda 12.4 -> 12.6",))
    job = facts(regressions=(small, clean))
    finding = r.software_regression(job)
    assert finding is not None and finding.cause == "software_regression"
    assert finding.evidence["component"] == "nccl" and finding.evidence["mfu_change"] == -0.06  # the largest
    assert finding.gpu_seconds == pytest.approx(job.step_gpu_seconds * 0.06)
    assert "2.23.4" in finding.advice and "not settled" not in finding.advice
    confounded = r.software_regression(facts(regressions=(small,)))
    assert confounded is not None and confounded.evidence["also_changed"] == "cuda 12.4 -> 12.6"
    assert "not settled" in confounded.advice
    assert r.software_regression(facts()) is None
