"""Rules over NCCL Inspector's figures (issue 61): a node whose collectives run far slower than the job's other
nodes', or below what its network ports can carry; a rank its peers wait for; a link below what the fabric carries.

Collectives are synchronous: every rank of a group waits for the slowest, so one node's slow links or ports cost the
whole group. Inspector gives each node's bus bandwidth per group over the agent's last interval (bus bytes ÷
GPU-timed seconds, NCCL's definition); comparing nodes of one group tells a slow node from a slow job. Per rank
(:mod:`mfumon.api.state.collective_ranks`) it tells two causes apart: a rank that arrives late shows the *shortest*
kernel time per operation of its communicator (the others wait inside theirs), while a slow link shows as low
bandwidth on the point-to-point transfers across it.
"""

from __future__ import annotations

from statistics import fmean, median

from mfumon.api.diagnosis.facts import CollectiveNodeFact, Finding, JobFacts
from mfumon.api.diagnosis.kinds import TRAINING, applies_to
from mfumon.api.state.collective_ranks import MIN_MESSAGE_BYTES, LinkFigure, WaitedRank

#: A node is slow when its bus bandwidth is below this share of the median of the group's other nodes.
SLOW_SHARE = 0.5
#: ... or, for a group that crosses nodes, below this share of what its ports can carry per rank.
BELOW_FABRIC_SHARE = 0.25
MIN_NODES = 3  # a median of two says nothing about which one is slow
#: A rank its peers wait for: its kernel time per operation at most half its communicator's median (lag ÷ median >=
#: 0.5), so its peers spend at least twice its kernel time per operation, the difference waiting for it.
WAITED_LAG_RATIO = 0.5
_NEXT_RANKS = 3  # other ranks named in a slow_rank finding, to show whether the culprit is alone


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


def _group_time_ratio(facts: JobFacts, group: str) -> float | None:
    """The group's time in its collective kernels: the mean over its nodes' figures (None without any)."""
    ratios = [f.time_ratio for f in facts.collectives if f.group == group and f.time_ratio is not None]
    return min(1.0, fmean(ratios)) if ratios else None


def _rank_name(rank: WaitedRank) -> dict[str, object]:
    return {
        "node": rank.node,
        "rank": rank.rank,
        "group": rank.group,
        "collective": rank.collective,
        "lag_ratio": round(rank.lag_ratio, 4),
    }


@applies_to(TRAINING)
def slow_rank(facts: JobFacts) -> Finding | None:
    """The rank of the job whose peers wait longest for it in one communicator's collectives.

    In a collective each rank's kernel starts when the rank arrives and ends when the last one has: a rank that
    arrives late (a slow or throttled GPU, a straggling data loader, a busy host CPU) shows the *shortest* kernel
    time per operation, while its peers' are long. So the culprit is the rank far below its communicator's median
    (lag ratio >= :data:`WAITED_LAG_RATIO`), the one with the largest lag per operation first.

    GPU-seconds at stake: the step GPU-seconds x the share of time in the group's collectives (the mean of its nodes'
    time ratios; without them the communicator's own, median time per operation x operations ÷ interval) x the lag
    ratio, the part of that time its peers spend waiting for it; at most the step GPU-seconds.
    """
    waited = [w for w in facts.waited_ranks if w.lag_ratio >= WAITED_LAG_RATIO]
    if not waited:
        return None
    worst = max(waited, key=lambda w: (w.lag_seconds, w.comm_id, w.collective, -w.rank))
    share = _group_time_ratio(facts, worst.group)
    if share is None and worst.interval_seconds > 0:
        share = min(1.0, worst.peers_median_seconds_per_operation * worst.operations / worst.interval_seconds)
    step = facts.step_gpu_seconds
    stake = min(step, step * (share or 0.0) * worst.lag_ratio)
    others = sorted(
        (w for w in facts.waited_ranks if w is not worst and w.lag_seconds > 0), key=lambda w: -w.lag_seconds
    )
    evidence: dict[str, object] = {
        "node": worst.node,
        "rank": worst.rank,
        "group": worst.group,
        "collective": worst.collective,
        "comm_id": worst.comm_id,
        "kernel_per_operation_seconds": worst.seconds_per_operation,
        "peers_median_per_operation_seconds": worst.peers_median_seconds_per_operation,
        "lag_ratio": round(worst.lag_ratio, 4),
        "ranks_seen": worst.ranks_seen,
        "communicator_ranks": worst.n_ranks,
        "time_in_collectives_ratio": None if share is None else round(share, 4),
        "next_waited_ranks": [_rank_name(w) for w in others[:_NEXT_RANKS]],
    }
    advice = (
        f"Rank {worst.rank} on {worst.node} spends {worst.seconds_per_operation * 1e3:.3g} ms per {worst.collective} "
        f"of group {worst.group} in its kernels, against a median of "
        f"{worst.peers_median_seconds_per_operation * 1e3:.3g} ms over its communicator's {worst.ranks_seen} ranks: "
        "a short kernel time is the late rank's signature, since its peers are already waiting inside theirs when "
        "it arrives. Look at that rank's GPU (its clocks and throttle reasons on /ui/nodes: a throttled or slower "
        "GPU), its host (CPU load, its data loader, a noisy neighbour), and the profile's "
        "ranks_waiting_in_communication finding (a profile shows the others' wait); if the hardware is healthy, "
        "its own work (an uneven data shard), and exclude the node on the next run."
    )
    return Finding("slow_rank", stake, evidence, advice)


def _link_advice(link: LinkFigure, bandwidth: float, expected: float) -> str:
    figures = f"{bandwidth / 1e9:.1f} GB/s of bus bandwidth against the {expected / 1e9:.1f} GB/s"
    if link.within_node:
        return (
            f"Point-to-point transfers of group {link.group} between ranks {link.rank} and {link.peer_rank} on "
            f"{link.node} run at {figures} NVLink "
            "carries one way between two of its GPUs. Check its NVLink: nvidia-smi nvlink -s (a link down or slow), "
            "nvidia-smi nvlink -e (errors), and the fabric and NVLink-recovery checks on /ui/nodes (the drain "
            "list's runbook, MfumonNodeDrain); transfers NCCL routes over PCIe instead (NCCL_P2P_DISABLE, a "
            "topology it could not read) read the same."
        )
    return (
        f"Point-to-point transfers of group {link.group} between rank {link.rank} on {link.node} and rank "
        f"{link.peer_rank} on {link.peer_node} run at {figures} "
        "the weaker end's active ports carry per GPU. Check both nodes' ports: state, rate (a port downtrained to a "
        "lower rate) and error counters (ibstat, perfquery -x; /ui/nodes), and the drain list's runbook "
        "(MfumonNodeDrain); drain the node whose port is at fault."
    )


@applies_to(TRAINING)
def slow_link(facts: JobFacts) -> Finding | None:
    """The job's point-to-point link furthest below what the fabric carries: NVLink inside a node, the weaker end's
    ports per GPU across nodes. A link is judged only with messages of :data:`MIN_MESSAGE_BYTES` or more (smaller
    ones are bound by latency) and named below :data:`BELOW_FABRIC_SHARE` of the figure.

    GPU-seconds at stake: the step GPU-seconds x the share of time in the group's collectives (the mean of its nodes'
    time ratios; without them the link's own, its seconds ÷ its ranks' interval) x the shortfall (1 - bandwidth ÷
    expected); at most the step GPU-seconds.
    """
    worst: tuple[float, LinkFigure, float, float] | None = None
    for link in facts.links:
        bandwidth, expected, message = link.bus_bandwidth, link.expected, link.mean_message_bytes
        if bandwidth is None or not expected or message is None or message < MIN_MESSAGE_BYTES:
            continue
        ratio = bandwidth / expected
        if ratio < BELOW_FABRIC_SHARE and (worst is None or ratio < worst[0]):
            worst = (ratio, link, bandwidth, expected)
    if worst is None:
        return None
    ratio, link, bandwidth, expected = worst
    share = _group_time_ratio(facts, link.group)
    if share is None:
        share = link.time_ratio
    step = facts.step_gpu_seconds
    stake = min(step, step * (share or 0.0) * (1.0 - ratio))
    evidence: dict[str, object] = {
        "node": link.node,
        "rank": link.rank,
        "peer_node": link.peer_node,
        "peer_rank": link.peer_rank,
        "within_node": link.within_node,
        "group": link.group,
        "comm_id": link.comm_id,
        "bus_bandwidth_bytes_per_second": round(bandwidth),
        "expected_bytes_per_second": round(expected),
        "of_expected_ratio": round(ratio, 4),
        "mean_message_bytes": round(link.mean_message_bytes or 0.0),
        "time_in_collectives_ratio": None if share is None else round(share, 4),
    }
    return Finding("slow_link", stake, evidence, _link_advice(link, bandwidth, expected))


COLLECTIVE_RULES = (slow_collective_node, slow_rank, slow_link)
