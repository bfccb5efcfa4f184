"""The diagnosis reads the latest profile: exposed communication by group, waiting ranks, tensor-core-idle kernels."""

from __future__ import annotations

from typing import Any

import pytest

from mfumon.api.diagnosis import diagnose
from mfumon.api.diagnosis.facts import JobFacts
from mfumon.api.state.profiles import combine


def _rank(rank: int, comm: float, exposed_tp: float, exposed_ep: float, **extra: Any) -> dict[str, Any]:
    """One rank's summary over 10 s of device time: TP and EP communication, the rest compute."""
    return {
        "rank": rank,
        "span_seconds": 10.0,
        "compute_seconds": 8.0,
        "comm_seconds": comm,
        "exposed_comm_seconds": exposed_tp + exposed_ep,
        "idle_seconds": 0.5,
        "groups": [
            {"group": "tp", "comm_seconds": comm / 2, "exposed_seconds": exposed_tp},
            {"group": "ep", "comm_seconds": comm / 2, "exposed_seconds": exposed_ep},
        ],
        "collectives": [
            {
                "collective": "reduce_scatter",
                "group": "tp",
                "comm_seconds": comm / 2,
                "exposed_seconds": exposed_tp,
                "count": 10,
            },
            {
                "collective": "all_to_all",
                "group": "ep",
                "comm_seconds": comm / 2,
                "exposed_seconds": exposed_ep,
                "count": 10,
            },
        ],
        **extra,
    }


def _facts(summaries: list[dict[str, Any]]) -> JobFacts:
    figures = combine(42, 1.7e9, summaries)
    waterfall = {"compute": 9000.0, "comm_exposed": 1000.0}
    return JobFacts(job_id="j", gpu_seconds=waterfall, profile=figures, reports_received=10)


def test_exposed_communication_by_group_cites_the_profile() -> None:
    # TP: 1.5 s exposed of 40 s device time (0.0375, under the threshold); EP: 4 s (0.10).
    facts = _facts([_rank(r, 2.0, 0.375, 1.0) for r in range(4)])
    found = {f.cause: f for f in diagnose(facts)}
    assert "exposed_tp_communication" not in found
    ep = found["exposed_ep_communication"]
    assert ep.evidence["exposed_comm_ratio"] == pytest.approx(0.10)
    assert ep.evidence["top_collective"] == "all_to_all" and ep.evidence["profile_id"] == 42
    assert ep.gpu_seconds == pytest.approx(10_000 * 0.10)  # the step time so far x the profile's share
    assert "all-to-all" in ep.advice
    generic = found["exposed_communication"]
    assert generic.evidence["profile_exposed_comm_ratio_by_group"] == {"tp": 0.0375, "ep": 0.1}


def test_the_ranks_that_wait_and_the_one_they_wait_for() -> None:
    summaries = [_rank(0, 1.0, 0.0, 0.0), _rank(1, 1.0, 0.0, 0.0), _rank(2, 3.0, 0.0, 0.0), _rank(3, 0.5, 0.0, 0.0)]
    found = {f.cause: f for f in diagnose(_facts(summaries))}
    waiting = found["ranks_waiting_in_communication"]
    assert waiting.evidence["waiting_ranks"] == [{"rank": 2, "comm_ratio": 0.3}]
    assert waiting.evidence["least_waiting_rank"] == {"rank": 3, "comm_ratio": 0.05}
    assert waiting.gpu_seconds == pytest.approx(10_000 * (0.3 - 0.1) / 4)


def test_even_ranks_wait_for_no_one() -> None:
    found = {f.cause for f in diagnose(_facts([_rank(r, 1.0, 0.0, 0.0) for r in range(4)]))}
    assert "ranks_waiting_in_communication" not in found


def test_kernels_that_keep_the_tensor_cores_idle_are_named() -> None:
    kernels = [{"name": "vectorized_elementwise_kernel", "seconds": 4.0, "count": 100}]
    summaries = [_rank(0, 1.0, 0.0, 0.0, tensor_core_ratio=0.25, top_kernels=kernels)]
    finding = {f.cause: f for f in diagnose(_facts(summaries))}["kernels_without_tensor_cores"]
    assert finding.evidence["top_kernels"] == [{"name": "vectorized_elementwise_kernel", "share_of_compute": 0.5}]
    assert finding.gpu_seconds == pytest.approx(9000 * 0.75)
    tensor_heavy = [_rank(0, 1.0, 0.0, 0.0, tensor_core_ratio=0.8, top_kernels=kernels)]
    assert "kernels_without_tensor_cores" not in {f.cause for f in diagnose(_facts(tensor_heavy))}


def test_no_profile_no_profile_findings() -> None:
    facts = JobFacts(job_id="j", gpu_seconds={"compute": 9000.0, "comm_exposed": 1000.0}, reports_received=10)
    causes = {f.cause for f in diagnose(facts)}
    assert causes == {"exposed_communication"}
