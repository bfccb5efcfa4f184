"""A node whose collectives run slow (issue 61): against the job's other nodes of the same group, or below what its
ports carry per rank for a group that crosses nodes; nothing when every node is alike or there are too few to tell.
A rank its peers wait for (the shortest kernel time of its communicator), a link below what the fabric carries."""

from __future__ import annotations

from typing import Any

import pytest

from mfumon.api.diagnosis.collectives import slow_collective_node, slow_link, slow_rank
from mfumon.api.diagnosis.facts import CollectiveNodeFact, JobFacts
from mfumon.api.state.collective_ranks import MIN_MESSAGE_BYTES, LinkFigure, WaitedRank


def facts(*nodes: CollectiveNodeFact, **fields: Any) -> JobFacts:
    gpu_seconds = {"compute": 8000.0, "comm_exposed": 2000.0}
    return JobFacts(job_id="j", gpu_seconds=gpu_seconds, collectives=nodes, **fields)


def node(name: str, bandwidth: float | None, *, group: str = "dp", expected: float | None = 50e9) -> CollectiveNodeFact:
    return CollectiveNodeFact(name, group, bandwidth, 0.25, True, expected)


def test_the_slowest_node_against_its_peers_with_the_evidence() -> None:
    finding = slow_collective_node.check(facts(node("n1", 40e9), node("n2", 42e9), node("n3", 8e9), node("n4", 41e9)))
    assert finding is not None and finding.cause == "slow_collective_node"
    assert finding.evidence["node"] == "n3" and finding.evidence["others_median_bytes_per_second"] == 41e9
    assert finding.gpu_seconds == pytest.approx(10_000 * 0.25 * (1 - 8 / 41))
    assert "n3" in finding.advice and "MfumonNodeDrain" in finding.advice


def test_alike_nodes_or_too_few_to_tell_find_nothing_and_the_fabric_catches_a_lone_slow_group() -> None:
    assert slow_collective_node.check(facts(node("n1", 40e9), node("n2", 39e9), node("n3", 41e9))) is None
    # Two nodes: which one is slow cannot be told from each other, but 5 GB/s on 50 GB/s ports can.
    finding = slow_collective_node.check(facts(node("n1", 40e9), node("n2", 5e9)))
    assert finding is not None and finding.evidence["node"] == "n2"
    assert finding.evidence["others_median_bytes_per_second"] is None
    assert finding.evidence["ports_bytes_per_second_per_rank"] == 50e9
    # A group within one node (NVLink): its ports say nothing about it.
    inside = CollectiveNodeFact("n1", "tp", 5e9, 0.25, False, 50e9)
    assert slow_collective_node.check(facts(inside)) is None
    assert slow_collective_node.check(facts(node("n1", None), node("n2", None), node("n3", None))) is None


def waited(node_name: str, rank: int, own: float, *, median_: float = 0.01, group: str = "dp") -> WaitedRank:
    lag = median_ - own
    return WaitedRank(
        node_name, group, "0xc0", "AllReduce", rank, 8, 8, 100, own, median_, lag, lag / median_, 5e10, 10.0
    )


def test_the_rank_its_peers_wait_for_with_the_evidence() -> None:
    ranks = (waited("n2", 5, 0.002), waited("n1", 1, 0.004), waited("n3", 6, 0.009), waited("n1", 0, 0.011))
    finding = slow_rank.check(facts(node("n1", 40e9), node("n2", 40e9), waited_ranks=ranks))
    assert finding is not None and finding.cause == "slow_rank"
    evidence = finding.evidence
    named = {key: evidence[key] for key in ("node", "rank", "group", "collective")}
    assert named == {"node": "n2", "rank": 5, "group": "dp", "collective": "AllReduce"}
    assert evidence["comm_id"] == "0xc0" and evidence["ranks_seen"] == 8
    assert evidence["kernel_per_operation_seconds"] == 0.002
    assert evidence["peers_median_per_operation_seconds"] == 0.01
    assert evidence["lag_ratio"] == pytest.approx(0.8)
    # The next ranks their peers wait for (lag above 0), to show whether the culprit is alone.
    assert [(r["node"], r["rank"]) for r in evidence["next_waited_ranks"]] == [("n1", 1), ("n3", 6)]
    # Step GPU-seconds x the dp group's time in collectives (0.25 on its nodes) x the lag ratio.
    assert finding.gpu_seconds == pytest.approx(10_000 * 0.25 * 0.8)
    assert "short kernel time is the late rank's signature" in finding.advice
    assert "ranks_waiting_in_communication" in finding.advice and "/ui/nodes" in finding.advice


def test_without_the_groups_time_share_the_stake_is_the_communicators_own_and_bounded() -> None:
    # No per-node figures: the communicator's median 10 ms x 100 operations over 10 s is 10 % of the ranks' time.
    finding = slow_rank.check(facts(waited_ranks=(waited("n2", 5, 0.002), waited("n1", 0, 0.011))))
    assert finding is not None and finding.evidence["time_in_collectives_ratio"] == pytest.approx(0.1)
    assert finding.gpu_seconds == pytest.approx(10_000 * 0.1 * 0.8)
    busy = waited("n2", 5, 0.02, median_=1.0)  # 1 s per operation x 100 over 10 s: capped at all of the time
    capped = slow_rank.check(facts(waited_ranks=(busy,)))
    assert capped is not None and capped.gpu_seconds <= 10_000


def test_ranks_within_half_their_median_are_no_finding() -> None:
    healthy = (waited("n1", 0, 0.006), waited("n2", 1, 0.01), waited("n3", 2, 0.012))  # lag ratio 0.4 at most
    assert slow_rank.check(facts(node("n1", 40e9), waited_ranks=healthy)) is None
    assert slow_rank.check(facts()) is None


def link(
    bandwidth: float | None,
    expected: float | None,
    *,
    message: float = 64 * 2**20,
    pair: tuple[str, str] = ("n1", "n2"),
    group: str = "pp",
) -> LinkFigure:
    within = pair[0] == pair[1]
    ratio = bandwidth / expected if bandwidth is not None and expected else None
    return LinkFigure(
        group, *pair, within, 200, 4.0, message * 200, message * 200, bandwidth, message, expected, ratio, 0.2
    )


def test_the_link_furthest_below_the_fabric_with_the_evidence() -> None:
    links = (link(2e9, 6.25e9), link(1e9, 6.25e9, pair=("n2", "n3")), link(40e9, 450e9, pair=("n1", "n1")))
    finding = slow_link.check(facts(links=links))
    assert finding is not None and finding.cause == "slow_link"
    evidence = finding.evidence
    named = {key: evidence[key] for key in ("node", "peer_node", "within_node", "group")}
    assert named == {"node": "n1", "peer_node": "n1", "within_node": True, "group": "pp"}
    assert evidence["bus_bandwidth_bytes_per_second"] == 40e9 and evidence["expected_bytes_per_second"] == 450e9
    assert evidence["of_expected_ratio"] == pytest.approx(40 / 450, abs=1e-4)
    assert evidence["mean_message_bytes"] == 64 * 2**20
    # No group time share in the facts: the link's own (its ranks' 20 % of their interval) x the shortfall.
    assert finding.gpu_seconds == pytest.approx(10_000 * 0.2 * (1 - 40 / 450))
    assert "nvlink -s" in finding.advice and "MfumonNodeDrain" in finding.advice
    across = slow_link.check(facts(links=links[:2]))
    assert across is not None and across.evidence["peer_node"] == "n3" and not across.evidence["within_node"]
    assert "ports" in across.advice and "MfumonNodeDrain" in across.advice
    assert "rank 0 on n2 and rank 0 on n3" in across.advice


def test_links_near_the_fabric_small_messages_or_unknown_figures_are_no_finding() -> None:
    healthy = (link(2e9, 6.25e9), link(300e9, 450e9, pair=("n1", "n1")))  # 32 %: slow, not a quarter
    assert slow_link.check(facts(links=healthy)) is None
    small = link(0.1e9, 6.25e9, message=float(MIN_MESSAGE_BYTES - 1))  # latency-bound: not judged
    assert slow_link.check(facts(links=(small,))) is None
    assert slow_link.check(facts(links=(link(0.1e9, None), link(None, 6.25e9)))) is None
