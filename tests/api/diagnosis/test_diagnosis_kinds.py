"""Findings by job kind: every rule declares the kinds it applies to, ``diagnose`` runs only those of the job's kind,
and a rule that judges both speaks the kind's own words."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

import pytest

from mfumon.api.diagnosis import RULES, GpuFacts, JobFacts, RuleSpec, applies_to, diagnose, empty_reason
from mfumon.api.diagnosis import rules as r
from mfumon.api.diagnosis.facts import (
    CollectiveNodeFact,
    EngineEstimateFacts,
    RegressionFact,
    ServingFacts,
    ServingIntervalFacts,
)
from mfumon.api.diagnosis.kinds import KINDS
from mfumon.api.diagnosis.reasons import NOTHING_FOUND
from mfumon.api.schemas._common import Kind
from mfumon.api.state.collective_ranks import LinkFigure, WaitedRank
from mfumon.api.state.profiles import combine

#: The decision for every rule, pinned: a rule added without a line here fails test_every_rule_declares_its_kinds.
DECLARED = {
    "slow_rank": {"training"},
    "slow_link": {"training"},
    "busy_without_reporting": {"training", "inference"},
    "exposed_communication": {"training"},
    "data_loading": {"training"},
    "pipeline_bubbles": {"training"},
    "tensor_cores_idle": {"training"},  # decode is memory-bound: idle tensor pipes are expected there
    "throttling": {"training", "inference"},
    "stragglers": {"training"},
    "clock_power_stragglers": {"training", "inference"},
    "checkpoint_overhead": {"training"},
    "failures": {"training", "inference"},
    "slow_startup": {"training", "inference"},
    "stalled": {"training"},  # a server's zero-token interval is idle, not stalled
    "below_baseline": {"training"},
    "software_regression": {"training"},
    "slow_collective_node": {"training"},
    "accounting_suspect": {"training", "inference"},
    **{f"exposed_{g}_communication": {"training"} for g in ("tp", "pp", "dp", "ep", "cp", "other")},
    "waiting_ranks": {"training"},
    "kernels_without_tensor_cores": {"training"},
    "engine_mfu_disagrees": {"inference"},
    "decode_memory_bound": {"inference"},
    "batch_underfilled": {"inference"},
    "kv_cache_saturated": {"inference"},
    "prefill_interference": {"inference"},
    "idle_replicas": {"inference"},
    "slo_misses": {"inference"},
}
TRAINING_ONLY_CAUSES = {
    "exposed_communication",
    "data_loading",
    "pipeline_bubbles",
    "tensor_cores_idle",
    "stragglers",
    "checkpoint_overhead",
    "lost_progress",
    "stalled",
    "below_baseline",
    "software_regression",
    "slow_collective_node",
    "slow_rank",
    "slow_link",
    "exposed_tp_communication",
    "exposed_ep_communication",
    "ranks_waiting_in_communication",
    "kernels_without_tensor_cores",
}
SHARED_CAUSES = {
    "busy_without_reporting",
    "throttling",
    "clock_power_straggler",
    "repeated_failures",
    "slow_startup",
    "mfu_accounting_suspect",
}
SERVING_CAUSES = {
    "engine_mfu_disagrees",
    "decode_memory_bound",
    "batch_underfilled",
    "kv_cache_saturated",
    "prefill_interference",
    "idle_replicas",
    "slo_misses",
}


def test_every_rule_declares_its_kinds() -> None:
    assert set(KINDS) == set(get_args(Kind)) == {"training", "inference"}
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))
    for rule in RULES:
        assert isinstance(rule, RuleSpec), rule
        assert rule.kinds and rule.kinds <= set(KINDS), rule.name
    assert {rule.name: set(rule.kinds) for rule in RULES} == DECLARED


def test_a_rule_must_name_known_kinds() -> None:
    def check(facts: JobFacts) -> None:
        return None

    with pytest.raises(ValueError, match="unknown job kinds"):
        applies_to("training", "batch")(check)
    with pytest.raises(ValueError, match="no job kind"):
        applies_to()(check)
    spec = applies_to("inference")(check)
    assert spec.name == "check" and spec.applies("inference") and not spec.applies("training")


def _profile_summary(rank: int) -> dict[str, object]:
    comm = 2.0 if rank else 5.0  # rank 0 waits in collectives far longer than the others
    return {
        "rank": rank,
        "span_seconds": 10.0,
        "compute_seconds": 8.0,
        "comm_seconds": comm,
        "exposed_comm_seconds": 2.0,
        "idle_seconds": 0.5,
        "groups": [
            {"group": "tp", "comm_seconds": comm / 2, "exposed_seconds": 1.0},
            {"group": "ep", "comm_seconds": comm / 2, "exposed_seconds": 1.0},
        ],
        "collectives": [],
        "tensor_core_ratio": 0.2,
    }


def _gpus() -> tuple[GpuFacts, ...]:
    """Eight busy GPUs with idle tensor pipes; one slower (a pace setter), one throttled at a low clock."""
    gpus = [
        GpuFacts(
            node=f"n{i // 4}",
            index=i % 4,
            uuid=f"GPU-{i}",
            utilization=1.0,
            sm_active=0.8,
            tensor_active=0.1,
            sm_clock_hz=1.98e9,
            max_sm_clock_hz=1.98e9,
            power_watts=650.0,
        )
        for i in range(8)
    ]
    gpus[7] = replace(gpus[7], tensor_active=0.2, sm_clock_hz=1.2e9, throttle_reasons=("hw_thermal",))
    return tuple(gpus)


def training_trouble(kind: str) -> JobFacts:
    """Facts that trip every training rule (and the shared ones)."""
    return JobFacts(
        job_id="j",
        kind=kind,
        dtype="bf16",
        gpu_seconds={
            "init": 1500.0,
            "checkpoint": 1500.0,
            "lost": 1500.0,
            "stalled": 1500.0,
            "data_wait": 1000.0,
            "comm_exposed": 2000.0,
            "bubble": 1000.0,
            "compute": 6000.0,
        },
        mfu=0.2,
        baseline_mfu=0.45,
        hardware_mfu=0.1,
        accounting_verdict="over_claims",
        accounting_message="check params",
        agreement=2.0,
        failures=3,
        restarts=3,
        tensor_spread=0.5,
        step_time_deviation=0.3,
        gpus=_gpus(),
        reports_received=0,
        profile=combine(42, 1.7e9, [_profile_summary(rank) for rank in range(4)]),
        regressions=(RegressionFact("nccl", "2.21.5", "2.23.4", -0.06, 0.999),),
        collectives=tuple(CollectiveNodeFact(f"n{i}", "dp", 40e9 if i else 5e9, 0.2, True, 50e9) for i in range(4)),
        waited_ranks=(  # rank 3 arrives late: its kernel is a third of its peers'
            WaitedRank("n3", "dp", "0xabc", "AllReduce", 3, 4, 4, 50, 0.01, 0.03, 0.02, 2 / 3, 1e10, 10.0),
        ),
        links=(  # a pipeline link at a tenth of what the ports carry per GPU, with large messages
            LinkFigure("pp", "n1", "n2", False, 40, 4.0, 2e10, 2e10, 5e9, 5e8, 50e9, 0.1, 0.4, "0xdef", 1, 2),
        ),
    )


def serving_trouble(kind: str) -> JobFacts:
    """Facts that trip every serving rule."""
    intervals = tuple(
        ServingIntervalFacts(at=float(10 * i), prefill_tokens_per_second=load, tpot_p90_seconds=tpot)
        for i, (load, tpot) in enumerate(
            [(100, 0.05), (200, 0.05), (5000, 0.2), (300, 0.06), (6000, 0.25), (400, 0.06)]
        )
    )
    serving = ServingFacts(
        engine="vllm",
        gpus=8.0,
        requests_per_second=2.0,
        batch_size=8.0,
        requests_running=8.0,
        requests_waiting=4.0,
        kv_cache_usage=0.4,
        max_kv_cache_usage=0.95,
        preemptions=12,
        mbu=0.7,
        ttft_target_seconds=1.0,
        tpot_target_seconds=0.1,
        objective_ratio=0.9,
        ttft_met=(0.6, 0.7),
        tpot_met=(0.5, 0.6),
        goodput=(0.1, 0.6),
        tpot_p90_seconds=0.2,
        intervals=intervals,
        waterfall={"down": 100.0, "idle": 6000.0, "prefill": 1000.0, "decode": 2500.0, "recompute": 400.0},
    )
    estimate = EngineEstimateFacts(ours_flops_per_second=1e15, engine_flops_per_second=3e14, engine="vllm")
    return JobFacts(
        job_id="chat",
        kind=kind,
        gpu_seconds={"compute": 4000.0, "stalled": 6000.0},
        reports_received=30,
        serving=serving,
        engine_estimate=estimate,
    )


def test_training_facts_trip_every_training_rule_for_a_training_job() -> None:
    causes = {f.cause for f in diagnose(training_trouble("training"))}
    assert causes == (TRAINING_ONLY_CAUSES - {"lost_progress"}) | SHARED_CAUSES  # repeated failures win over lost


def test_no_training_cause_for_a_serving_job_whose_facts_would_trip_them() -> None:
    findings = diagnose(training_trouble("inference"))
    assert {f.cause for f in findings} == SHARED_CAUSES
    for finding in findings:  # a server has no steps, ranks, gradients or checkpoints
        for word in ("step", "gradient", "checkpoint", "micro-batch", "every rank"):
            assert word not in finding.advice.lower(), (finding.cause, word)


def test_serving_facts_trip_every_serving_rule_for_a_serving_job() -> None:
    assert {f.cause for f in diagnose(serving_trouble("inference"))} == SERVING_CAUSES


def test_no_serving_cause_for_a_training_job_whose_facts_would_trip_them() -> None:
    assert {f.cause for f in diagnose(serving_trouble("training"))} & SERVING_CAUSES == set()


def test_a_serving_failure_costs_its_down_time_not_lost_progress() -> None:
    facts = replace(serving_trouble("inference"), failures=1, restarts=1, gpu_seconds={"lost": 5000.0})
    assert r.failures(facts) is None  # one failure of a server loses no progress: there is none to lose
    finding = r.failures(replace(facts, failures=2, restarts=2, exit_codes=(137, 137)))
    assert finding is not None and finding.cause == "repeated_failures"
    assert finding.gpu_seconds == 100.0  # the serving waterfall's down
    assert finding.evidence == {
        "failures": 2,
        "restarts": 2,
        "down_gpu_seconds": 100.0,
        "share_of_allocated": 0.02,
        "exit_codes": [137, 137],
    }
    assert "--gpu-memory-utilization" in finding.advice and "--mem-fraction-static" in finding.advice


def test_shared_rules_cost_a_serving_job_its_working_time() -> None:
    facts = replace(serving_trouble("inference"), gpus=_gpus())
    working = 1000.0 + 2500.0 + 400.0  # prefill + decode + recompute
    throttled = r.throttling(facts)
    assert throttled is not None
    assert throttled.gpu_seconds == pytest.approx(working * (1 - 1.2 / 1.98))
    assert throttled.advice.startswith("A throttled GPU slows every token of its replica")
    straggler = {f.cause: f for f in diagnose(facts)}["clock_power_straggler"]
    assert straggler.gpu_seconds == pytest.approx(working * (1 - 1.2 / 1.98))
    assert "move the replica off it" in straggler.advice and "sbatch --exclude" in straggler.advice


def test_under_claims_of_a_serving_job_point_at_serving_work() -> None:
    facts = replace(serving_trouble("inference"), accounting_verdict="under_claims", agreement=0.5)
    finding = r.accounting_suspect(facts)
    assert finding is not None and "speculative decoding" in finding.advice
    assert "recompute_activations" not in finding.advice
    assert finding.gpu_seconds == pytest.approx(3900.0 * 0.5)


def test_busy_serving_gpus_without_reports_point_at_the_engine_metrics() -> None:
    silent = replace(training_trouble("inference"), reports_received=0)
    finding = r.busy_without_reporting(silent)
    assert finding is not None and "--inference.url" in finding.advice and "JobReporter" not in finding.advice
    training = r.busy_without_reporting(replace(silent, kind="training"))
    assert training is not None and "JobReporter" in training.advice


def test_slow_startup_speaks_of_the_engine_for_a_serving_job() -> None:
    finding = r.slow_startup(replace(serving_trouble("inference"), gpu_seconds={"init": 1500.0, "compute": 1000.0}))
    assert finding is not None and "loading the weights" in finding.advice and "TORCHINDUCTOR" not in finding.advice


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_nothing_found_names_the_kinds_own_thresholds(kind: str) -> None:
    code, reason = empty_reason(JobFacts(job_id="j", kind=kind, reports_received=5))
    assert code == "nothing_found" and reason == NOTHING_FOUND[kind]
    if kind == "training":
        assert "exposed communication under 10% of step time" in reason
    else:
        assert "step" not in reason and "decode MBU under 60%" in reason and "KV cache 90% full" in reason
        assert "idle under 50% of the allocation" in reason and "within 1.5x" in reason


def test_no_reports_tells_a_serving_job_to_let_the_exporter_read_its_engine() -> None:
    code, reason = empty_reason(JobFacts(job_id="chat", kind="inference", reports_received=0))
    assert code == "no_reports" and "--inference.url" in reason and "training script" not in reason
    code, reason = empty_reason(JobFacts(job_id="j", kind="training", reports_received=0))
    assert code == "no_reports" and "JobReporter in the training script" in reason
