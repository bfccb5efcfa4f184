"""One fold of NCCL Inspector's per-group figures (``mfumon.api.state.collectives``) for /metrics, the diagnosis and
the job page: bandwidth over every GPU-timed second, time share only over rows that cover a known interval, a node's
capacity from its largest row (every kind runs on the group's ranks), and nodes added up."""

from __future__ import annotations

import pytest

from mfumon.api.state.collectives import collective_time_ratios, job_groups, node_groups
from mfumon.api.state.views import CollectiveView, NodeView
from tests.utils.factories import inspector_node


def node(name: str, *rows: CollectiveView) -> NodeView:
    return inspector_node(name, collectives=rows)


def row(
    group: str, op: str, ranks: int, seconds: float, bus: float, interval: float, *, job: str = "llm", lost: int = 0
) -> CollectiveView:
    return CollectiveView(job, group, op, ranks, 16, 10, 1.0, 1e9, 1e9, lost, seconds, bus, interval)


def test_a_node_s_capacity_is_its_largest_row_and_nodes_add_up() -> None:
    # dp on n1: AllReduce and ReduceScatter on the same 8 ranks over 10 s: capacity 80 rank-seconds, not 160.
    n1 = node(
        "n1", row("dp", "AllReduce", 8, 16.0, 3.2e12, 10.0), row("dp", "ReduceScatter", 8, 8.0, 8e11, 10.0, lost=3)
    )
    n2 = node("n2", row("dp", "AllReduce", 8, 8.0, 1.6e12, 10.0), row("tp", "AllGather", 8, 4.0, 1e12, 10.0))
    (only,) = node_groups(n1, {"llm"}).values()
    assert only.capacity == 80.0 and only.time_ratio == pytest.approx(24.0 / 80.0)
    assert only.bus_bandwidth == pytest.approx(4e12 / 24.0) and only.lost == 3 and only.ranks == 8
    groups = job_groups([n1, n2], {"llm"})
    dp = groups[("llm", "dp")]
    assert dp.capacity == 160.0 and dp.time_ratio == pytest.approx(32.0 / 160.0) and dp.ranks == 16
    assert dp.bus_bandwidth == pytest.approx(5.6e12 / 32.0)
    assert collective_time_ratios([n1, n2], "llm") == pytest.approx({"dp": 0.2, "tp": 0.05})
    assert job_groups([n1, n2], {"other"}) == {}


def test_a_first_read_s_backlog_counts_for_bandwidth_not_for_the_time_share() -> None:
    # The agent's first read has no interval: its seconds may be minutes of backlog, never a share of 0 s.
    first = node("n1", row("dp", "AllReduce", 8, 120.0, 2.4e13, 0.0))
    (window,) = node_groups(first, {"llm"}).values()
    assert window.bus_bandwidth == pytest.approx(2e11) and window.time_ratio is None
    assert collective_time_ratios([first], "llm") == {}
    later = node("n2", row("dp", "AllReduce", 8, 40.0, 8e12, 10.0))
    assert job_groups([first, later], {"llm"})[("llm", "dp")].time_ratio == pytest.approx(0.5)
