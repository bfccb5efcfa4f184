"""engine_mfu_disagrees: our serving FLOP/s beside the engine's own, on facts that should make it fire and not."""

from __future__ import annotations

from typing import Any

import pytest

from mfumon.api.diagnosis import JobFacts, diagnose
from mfumon.api.diagnosis.facts import EngineEstimateFacts
from mfumon.api.diagnosis.serving import ENGINE_AGREEMENT, engine_mfu_disagrees

OURS = 1.0e15  # FLOP/s


def serving(engine_flops: float, kind: str = "inference", **estimate: Any) -> JobFacts:
    facts = EngineEstimateFacts(
        ours_flops_per_second=OURS,
        engine_flops_per_second=engine_flops,
        engine=estimate.pop("engine", "vllm"),
        ours_mfu=0.2,
        engine_mfu=0.2 * engine_flops / OURS,
        ours_convention=estimate.pop("ours_convention", "2N+attention"),
    )
    return JobFacts(job_id="chat", kind=kind, gpu_seconds={"compute": 1000.0}, engine_estimate=facts)


@pytest.mark.parametrize("engine_flops", [OURS, OURS / 1.2, OURS / 0.85, OURS / ENGINE_AGREEMENT[1]])
def test_figures_within_the_conventions_spread_are_quiet(engine_flops: float) -> None:
    assert engine_mfu_disagrees(serving(engine_flops)) is None


def test_ours_far_above_theirs_names_both_conventions_and_the_figures() -> None:
    finding = engine_mfu_disagrees(serving(OURS / 2))  # ours / theirs = 2
    assert finding is not None
    assert finding.cause == "engine_mfu_disagrees"
    evidence = finding.evidence
    assert evidence["ratio"] == 2.0
    assert evidence["ours_flops_per_second"] == OURS and evidence["engine_flops_per_second"] == OURS / 2
    assert (evidence["ours_mfu"], evidence["engine_mfu"]) == (0.2, 0.1)
    assert evidence["bounds"] == [0.8, 1.25]
    assert "4 x layers x heads x head_dim" in evidence["ours_convention"]
    assert (
        evidence["engine_convention"].startswith("vLLM:")
        and "LM head for sampled tokens" in evidence["engine_convention"]
    )
    assert "active_params" in finding.advice
    assert finding.gpu_seconds == 1000.0  # compute x min(1, |1 - 2|)


def test_theirs_far_above_ours_points_at_their_extra_terms() -> None:
    finding = engine_mfu_disagrees(serving(OURS * 2, engine="sglang", ours_convention="2N"))
    assert finding is not None
    assert finding.evidence["ratio"] == 0.5
    assert "not divided by tensor parallelism" in finding.evidence["engine_convention"]
    assert "no attention term" in finding.evidence["ours_convention"]
    assert "heads and head_dim" in finding.advice
    assert finding.gpu_seconds == 500.0


def test_an_unnamed_engine_still_gets_a_finding() -> None:
    finding = engine_mfu_disagrees(serving(OURS / 3, engine=None))
    assert finding is not None and "not reported" in finding.evidence["engine_convention"]


@pytest.mark.parametrize("engine_flops", [0.0, -1.0])
def test_an_idle_or_silent_estimator_compares_nothing(engine_flops: float) -> None:
    assert engine_mfu_disagrees(serving(engine_flops)) is None


def test_training_jobs_and_jobs_without_an_estimate_are_left_alone() -> None:
    assert engine_mfu_disagrees(serving(OURS / 3, kind="training")) is None
    assert engine_mfu_disagrees(JobFacts(job_id="chat", kind="inference")) is None


def test_the_rule_runs_with_the_others() -> None:
    assert [f.cause for f in diagnose(serving(OURS / 3))] == ["engine_mfu_disagrees"]
