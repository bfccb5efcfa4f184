"""A node whose collectives run slow (issue 61): against the job's other nodes of the same group, or below what its
ports carry per rank for a group that crosses nodes; nothing when every node is alike or there are too few to tell."""

from __future__ import annotations

import pytest

from mfumon.api.diagnosis.collectives import slow_collective_node
from mfumon.api.diagnosis.facts import CollectiveNodeFact, JobFacts


def facts(*nodes: CollectiveNodeFact) -> JobFacts:
    return JobFacts(job_id="j", gpu_seconds={"compute": 8000.0, "comm_exposed": 2000.0}, collectives=nodes)


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
