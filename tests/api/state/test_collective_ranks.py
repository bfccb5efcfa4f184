"""NCCL Inspector per rank (issue 61): the rank its peers wait for (the shortest kernel time per operation of its
communicator), and point-to-point links against what NVLink or the nodes' ports carry."""

from __future__ import annotations

from typing import Any

import pytest

from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.api.state.collective_ranks import (
    MIN_MESSAGE_BYTES,
    JobRanks,
    node_pairs,
    port_bandwidth_per_gpu,
)
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.views import CollectiveRankView, NodeView, build_node_view, gpu_views, port_views
from mfumon.mfu._mfu import default_peak_table
from tests.utils.factories import gpu, ib_port

COMM = "0x7f8c496ae9f661"
MIB = 2**20


def rank(
    rank: int,
    seconds: float,
    *,
    operations: int = 100,
    comm_id: str = COMM,
    collective: str = "AllReduce",
    peer: int | None = None,
    traffic_bytes: float | None = None,
    bus_bytes: float | None = None,
    n_ranks: int = 4,
    group: str = "dp",
    job_id: str = "llm",
) -> CollectiveRankView:
    traffic = 64 * MIB * operations if traffic_bytes is None else traffic_bytes
    return CollectiveRankView(
        job_id,
        group,
        comm_id,
        collective,
        rank,
        n_ranks,
        peer,
        operations,
        seconds,
        traffic,
        traffic if bus_bytes is None else bus_bytes,
        10.0,
    )


def node(
    name: str,
    *rows: CollectiveRankView,
    ports: list[dict[str, Any]] | None = None,
    gpus: int = 8,
    t: float = 1.8e9,
) -> NodeView:
    sample = NodeSampleCreate.model_validate(
        {"timestamp": t, "gpus": [gpu(i, uuid=f"GPU-{name}-{i}", job_id="llm") for i in range(gpus)], "ib_ports": ports}
    )
    return build_node_view(
        name=name,
        pool=None,
        last_seen_at=t,
        last_sample_timestamp=t,
        samples_received=1,
        updated_at=t,
        gpus=gpu_views(name, t, sample.gpus, DeviceResolver(default_peak_table())),
        ib_ports=port_views(sample.ib_ports),
        collective_ranks=rows,
    )


def no_nvlink(_node: NodeView) -> float | None:
    return None


def test_the_late_rank_has_the_shortest_kernel_time_and_the_largest_lag() -> None:
    # Ranks 0, 1, 3 wait ~1 s per 100 operations (10 ms each); rank 2 arrives late and spends 2 ms in its kernels.
    nodes = [
        node("n1", rank(0, 1.0), rank(1, 1.1)),
        node("n2", rank(2, 0.2), rank(3, 0.9)),
        node("n3", rank(0, 0.5, comm_id="0xother", n_ranks=2)),  # another job's-size communicator, too few ranks
    ]
    ranks = JobRanks(nodes, "llm").waited()
    assert [(w.node, w.rank) for w in ranks] == [("n2", 2), ("n2", 3), ("n1", 0), ("n1", 1)]
    late = ranks[0]
    assert late.seconds_per_operation == pytest.approx(0.002)
    assert late.peers_median_seconds_per_operation == pytest.approx(0.0095)  # median of 2, 9, 10, 11 ms
    assert late.lag_seconds == pytest.approx(0.0075)
    assert late.lag_ratio == pytest.approx(0.0075 / 0.0095)
    assert late.ranks_seen == 4 and late.n_ranks == 4 and late.operations == 100
    assert late.bus_bandwidth == pytest.approx(64 * MIB * 100 / 0.2)
    assert ranks[-1].lag_seconds < 0  # rank 1 waits longest itself
    assert JobRanks(nodes, "other-job").waited() == []


def test_fewer_than_three_ranks_or_operations_say_nothing() -> None:
    assert JobRanks([node("n1", rank(0, 1.0), rank(1, 0.1))], "llm").waited() == []
    # Three ranks, but one timed only two operations: two ranks left, nothing to compare.
    thin = node("n1", rank(0, 1.0), rank(1, 1.0), rank(2, 0.01, operations=2))
    assert JobRanks([thin], "llm").waited() == []
    # Point-to-point rows are not collectives: never lined up as ranks of one.
    p2p = node("n1", *(rank(r, 1.0 if r else 0.1, collective="Send", peer=(r + 1) % 3) for r in range(3)))
    assert JobRanks([p2p], "llm").waited() == []


def test_a_rank_two_nodes_claim_is_kept_once_from_the_newest_view() -> None:
    stale = node("n0", rank(2, 0.2), t=1.8e9 - 600)  # rank 2 ran here before the job moved
    fresh = [node("n1", rank(0, 1.0), rank(1, 1.0)), node("n2", rank(2, 0.9), rank(3, 1.0))]
    for nodes in ([stale, *fresh], [*fresh, stale]):
        ranks = JobRanks(nodes, "llm").waited()
        assert len(ranks) == 4 and {w.ranks_seen for w in ranks} == {4}
        assert [w.node for w in ranks if w.rank == 2] == ["n2"]
        assert max(w.lag_ratio for w in ranks) < 0.1  # the stale 0.2 s is not counted
    # Two views of one age: the first name keeps it, whichever order they come in.
    twin = node("m0", rank(2, 0.2))
    assert [w.node for w in JobRanks([*fresh, twin], "llm").waited() if w.rank == 2] == ["m0"]
    assert [w.node for w in JobRanks([twin, *fresh], "llm").waited() if w.rank == 2] == ["m0"]


def test_a_send_and_its_recv_across_nodes_are_one_link_judged_against_the_weaker_ports() -> None:
    # Pipeline group: ranks 0, 1 on n1, ranks 2, 3 on n2; rank 1 sends to rank 2 and rank 2 receives from rank 1.
    one_port = [ib_port(rate_bytes_per_second=50e9)]
    two_ports = [ib_port("mlx5_0"), ib_port("mlx5_1"), ib_port("mlx5_2", state="DOWN")]
    a = node("n1", rank(0, 1.0, collective="AllReduce"), rank(1, 1.0, collective="Send", peer=2), ports=one_port)
    b = node("n2", rank(2, 3.0, collective="Recv", peer=1), rank(3, 1.0), ports=two_ports)
    (link,) = JobRanks([b, a], "llm").links(no_nvlink)
    assert (link.node, link.peer_node, link.within_node, link.group) == ("n1", "n2", False, "dp")
    assert link.operations == 200 and link.seconds == 4.0
    assert link.bus_bandwidth == pytest.approx(2 * 64 * MIB * 100 / 4.0)
    assert link.mean_message_bytes == 64 * MIB
    # n1: 50 GB/s over 8 GPUs; n2: two ACTIVE ports of 50 GB/s (the DOWN one left out) over 8: the weaker is n1's.
    assert port_bandwidth_per_gpu(a) == pytest.approx(6.25e9) and port_bandwidth_per_gpu(b) == pytest.approx(12.5e9)
    assert link.expected == pytest.approx(6.25e9)
    assert link.expected_ratio == pytest.approx(link.bus_bandwidth / 6.25e9)
    assert link.time_ratio == pytest.approx(4.0 / 20.0) and link.judged
    # Without ports on one end the link has no expected figure and is not judged.
    bare = node("n2", rank(2, 3.0, collective="Recv", peer=1), rank(3, 1.0))
    (unknown,) = JobRanks([a, bare], "llm").links(no_nvlink)
    assert unknown.expected is None and unknown.expected_ratio is None and not unknown.judged


def test_a_pair_within_a_node_is_judged_against_nvlink() -> None:
    inside = node("n1", rank(0, 0.5, collective="Send", peer=1), rank(1, 0.5, collective="Recv", peer=0), gpus=2)
    seen: list[str] = []

    def nvlink_of(view: NodeView) -> float | None:
        seen.append(view.name)
        return 450e9

    (link,) = JobRanks([inside], "llm").links(nvlink_of)
    assert seen == ["n1"] and link.within_node and (link.node, link.peer_node) == ("n1", "n1")
    assert link.expected == 450e9
    assert link.expected_ratio == pytest.approx((2 * 64 * MIB * 100 / 1.0) / 450e9)
    (unknown,) = JobRanks([inside], "llm").links(no_nvlink)
    assert unknown.expected is None and not unknown.judged


def test_small_messages_are_not_judged_and_sort_after_those_that_are() -> None:
    ports = [ib_port(rate_bytes_per_second=400e9)]
    small = 1 * MIB * 100  # 1 MiB per operation: latency-bound, however slow it reads
    rows_a = (rank(0, 1.0, group="pp", collective="Send", peer=2, traffic_bytes=small), rank(1, 1.0, group="tp"))
    rows_b = (rank(2, 1.0, group="tp"), rank(3, 2.0, group="tp", collective="Send", peer=1))
    links = JobRanks([node("n1", *rows_a, ports=ports), node("n2", *rows_b, ports=ports)], "llm").links(no_nvlink)
    assert [link.group for link in links] == ["tp", "pp"]
    slow_small, big = links[1], links[0]
    assert slow_small.mean_message_bytes == MIB < MIN_MESSAGE_BYTES and not slow_small.judged
    assert slow_small.expected_ratio is not None and slow_small.expected_ratio < big.expected_ratio  # type: ignore[operator]
    assert big.judged


def test_a_peer_no_node_reported_is_left_out_and_counted() -> None:
    a = node("n1", rank(0, 1.0, collective="Send", peer=1), rank(0, 1.0, collective="Send", peer=7), ports=[ib_port()])
    b = node("n2", rank(1, 1.0, collective="Recv", peer=0), ports=[ib_port()])
    links = JobRanks([a, b], "llm").links(no_nvlink)
    assert [(link.node, link.peer_node) for link in links] == [("n1", "n2")]
    assert links[0].operations == 200  # the Send to rank 7 is not in it
    assert JobRanks([a, b], "llm").unmapped == 1
    assert JobRanks([a], "llm").unmapped == 2
    assert JobRanks([a], "llm").links(no_nvlink) == []


def test_one_degraded_gpu_pair_is_not_averaged_away_by_its_node_s_healthy_pairs() -> None:
    """Four pipeline pairs inside one node, one at a tenth of NVLink: judged per pair of GPUs, it stands out; the
    node-pair view keeps that weakest pair, not a sum it would hide in (3 healthy pairs would lift it above 25 %)."""
    rows = []
    for sender in (0, 2, 4, 6):
        seconds = 100 * 64 * MIB / (45e9 if sender == 2 else 380e9)
        rows += [rank(sender, seconds, group="pp", collective="Send", peer=sender + 1, n_ranks=8)]
        rows += [rank(sender + 1, seconds, group="pp", collective="Recv", peer=sender, n_ranks=8)]
    inside = node("n1", *rows)
    links = JobRanks([inside], "llm").links(lambda _view: 450e9)
    assert len(links) == 4 and all(link.within_node and link.judged for link in links)
    worst = links[0]
    assert (worst.rank, worst.peer_rank, worst.comm_id) == (2, 3, COMM)
    assert worst.expected_ratio == pytest.approx(45e9 / 450e9)
    assert all(link.expected_ratio == pytest.approx(380e9 / 450e9) for link in links[1:])
    (pair,) = node_pairs(links)
    assert pair is worst and (pair.node, pair.peer_node) == ("n1", "n1")
    total = sum(link.bus_bytes for link in links) / sum(link.seconds for link in links)
    assert total / 450e9 > 0.25  # what a node-pair sum would have said: above the line
