"""Rules over NCCL Inspector's figures (issue 61): a node whose collectives run far slower than the job's other
nodes', or below what its network ports can carry.

Collectives are synchronous: every rank of a group waits for the slowest, so one node's slow links or ports cost the
whole group. Inspector gives each node's bus bandwidth per group over the agent's last interval (bus bytes ÷
GPU-timed seconds, NCCL's definition); comparing nodes of one group tells a slow node from a slow job.
"""

from __future__ import annotations

from statistics import median

from mfumon.api.diagnosis.facts import CollectiveNodeFact, Finding, JobFacts
from mfumon.api.diagnosis.kinds import TRAINING, applies_to

#: A node is slow when its bus bandwidth is below this share of the median of the group's other nodes.
SLOW_SHARE = 0.5
#: ... or, for a group that crosses nodes, below this share of what its ports can carry per rank.
BELOW_FABRIC_SHARE = 0.25
MIN_NODES = 3  # a median of two says nothing about which one is slow


@applies_to(TRAINING)
def slow_collective_node(facts: JobFacts) -> Finding | None:
    """The node of the job whose collectives on one group run slowest against the others' (or its ports'), with
    the evidence: its bandwidth, the others' median, its ports' figure."""
    worst: tuple[float, CollectiveNodeFact, float | None, str] | None = None
    by_group: dict[str, list[CollectiveNodeFact]] = {}
    for fact in facts.collectives:
        if fact.bus_bandwidth is not None and fact.bus_bandwidth > 0:
            by_group.setdefault(fact.group, []).append(fact)
    for nodes in by_group.values():
        for fact in nodes:
            bandwidth = fact.bus_bandwidth or 0.0
            others = [n.bus_bandwidth or 0.0 for n in nodes if n is not fact]
            typical = median(others) if len(nodes) >= MIN_NODES else None
            if typical is not None and bandwidth < SLOW_SHARE * typical:
                shortfall, why = 1.0 - bandwidth / typical, "peers"
            elif fact.crosses_nodes and fact.expected and bandwidth < BELOW_FABRIC_SHARE * fact.expected:
                shortfall, why = 1.0 - bandwidth / fact.expected, "fabric"
            else:
                continue
            if worst is None or shortfall > worst[0]:
                worst = (shortfall, fact, typical, why)
    if worst is None:
        return None
    shortfall, fact, typical, why = worst
    evidence: dict[str, object] = {
        "node": fact.node,
        "group": fact.group,
        "bus_bandwidth_bytes_per_second": round(fact.bus_bandwidth or 0.0),
        "others_median_bytes_per_second": None if typical is None else round(typical),
        "ports_bytes_per_second_per_rank": None if fact.expected is None else round(fact.expected),
        "time_in_collectives_ratio": None if fact.time_ratio is None else round(fact.time_ratio, 4),
    }
    against = (
        f"the median of the group's other nodes ({typical / 1e9:.1f} GB/s)"
        if why == "peers" and typical is not None
        else f"what its ports carry per rank ({(fact.expected or 0.0) / 1e9:.1f} GB/s)"
    )
    advice = (
        f"Collectives of group {fact.group} on {fact.node} run at {(fact.bus_bandwidth or 0.0) / 1e9:.1f} GB/s "
        f"of bus bandwidth, against {against}; every rank of the group waits for it. Check that node's network "
        "ports (state, rate, error counters: /ui/nodes and the drain list's runbook, MfumonNodeDrain) and its "
        "NVLink; move the job off it or drain it if the link is degraded."
    )
    stake = facts.step_gpu_seconds * min(1.0, fact.time_ratio or 0.0) * shortfall
    return Finding("slow_collective_node", stake, evidence, advice)


COLLECTIVE_RULES = (slow_collective_node,)
