"""The decision table and its rails, one test per row and per rail: pure inputs, exact decisions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from mfumon.exporter.scheduler.remediate.decide import budget_limit, decide, observe
from mfumon.exporter.scheduler.remediate.model import Decision, NodeHealth, Policy, SchedulerNode, Seen

NOW = 1_800_000_000.0
POLICY = Policy(
    drain_after_seconds=300,
    resume_after_seconds=900,
    max_pool_nodes=10,
    max_pool_ratio=1.0,
    max_cluster_nodes=10,
    max_cluster_ratio=1.0,
    max_actions=10,
    rate_window_seconds=3600,
)


def failing(name: str, *checks: str, gpus: tuple[int, ...] = (3,)) -> NodeHealth:
    return NodeHealth(name, healthy=False, drain=True, drain_checks=tuple(sorted(checks or ("xid",))), gpus=gpus)


def healthy(name: str) -> NodeHealth:
    return NodeHealth(name, healthy=True, drain=False)


def node(name: str, *pools: str, drained: bool = False, ours: bool = False, reason: str | None = None) -> SchedulerNode:
    return SchedulerNode(name, pools=pools or ("train",), drained=drained, ours=ours, reason=reason)


def run(
    health: Sequence[NodeHealth],
    nodes: Sequence[SchedulerNode],
    *,
    failing_for: float = 600,
    healthy_for: float = 1000,
    policy: Policy = POLICY,
    done: int = 0,
    kill: str | None = None,
) -> list[tuple[str, str, str | None]]:
    by_name = {h.name: h for h in health}
    seen = {
        h.name: Seen(failing_since=NOW - failing_for) if h.drain else Seen(healthy_since=NOW - healthy_for)
        for h in health
    }
    decisions = decide(by_name, nodes, seen, now=NOW, policy=policy, actions_done_recently=done, kill_switch=kill)
    return [(d.node, d.action, d.withheld) for d in decisions]


def test_row_4_a_node_on_the_drain_list_long_enough_is_drained_with_its_checks_and_gpus() -> None:
    health = {"n1": failing("n1", "xid", "responsive", gpus=(3, 5))}
    seen = {"n1": Seen(failing_since=NOW - 301)}
    [decision] = decide(health, [node("n1", "train", "infer")], seen, now=NOW, policy=POLICY)
    assert decision == Decision(
        "n1",
        "drain",
        "responsive,xid",
        checks=("responsive", "xid"),
        pools=("train", "infer"),
        gpus=(3, 5),
        detail="on the drain list for 301 s",
        failing_since=NOW - 301,  # the audit's start of the jobs' GPU-hours lost before the drain (issue 31 #3)
    )


def test_row_3_hysteresis_on_the_rising_edge() -> None:
    assert run([failing("n1")], [node("n1")], failing_for=299) == []
    assert run([failing("n1")], [node("n1")], failing_for=300) == [("n1", "drain", None)]


def test_row_1_a_person_drained_node_is_never_touched_only_recorded() -> None:
    nodes = [node("n1", drained=True, reason="bad fan -- bob")]
    assert run([failing("n1")], nodes) == [("n1", "drain", "not_ours")]
    assert run([healthy("n1")], nodes) == []  # and never resumed, however healthy


def test_row_2_a_node_the_scheduler_does_not_list() -> None:
    assert run([failing("ghost")], [node("n1")]) == [("ghost", "drain", "not_in_scheduler")]


def test_row_5_never_resume_while_a_check_still_fails_or_without_evidence() -> None:
    ours = [node("n1", drained=True, ours=True, reason="mfumon: xid")]
    assert run([failing("n1")], ours) == []  # still on the drain list
    degraded = NodeHealth("n1", healthy=False, drain=False)  # a check that needs no drain fails: still not healthy
    assert run([degraded], ours) == []
    assert run([], ours) == []  # the aggregator does not know the node (silent): no evidence, no resume


def test_rows_6_and_7_hysteresis_on_the_falling_edge() -> None:
    ours = [node("n1", drained=True, ours=True, reason="mfumon: xid")]
    assert run([healthy("n1")], ours, healthy_for=899) == []
    assert run([healthy("n1")], ours, healthy_for=900) == [("n1", "resume", None)]


def test_row_8_nothing_to_do() -> None:
    assert run([healthy("n1")], [node("n1")]) == []
    assert run([failing("n1")], [node("n1", drained=True, ours=True, reason="mfumon: xid")]) == []  # already


def test_kill_switch_withholds_every_action() -> None:
    nodes = [node("n1"), node("n2", drained=True, ours=True)]
    decisions = run([failing("n1"), healthy("n2")], nodes, kill="kill switch: MFUMON_REMEDIATE_STOP=1")
    assert decisions == [("n2", "resume", "kill_switch"), ("n1", "drain", "kill_switch")]


def test_rate_limit_counts_actions_done_in_the_window_and_this_round() -> None:
    policy = replace(POLICY, max_actions=3)
    nodes = [node(f"n{i}") for i in range(4)]
    health = [failing(f"n{i}") for i in range(4)]
    assert run(health, nodes, policy=policy, done=1) == [
        ("n0", "drain", None),
        ("n1", "drain", None),
        ("n2", "drain", "rate_limit"),
        ("n3", "drain", "rate_limit"),
    ]
    assert [w for _, _, w in run(health, nodes, policy=policy, done=3)] == ["rate_limit"] * 4


def test_pool_budget_counts_our_drains_in_every_pool_of_the_node() -> None:
    policy = replace(POLICY, max_pool_nodes=1)
    nodes = [
        node("a1", "train", drained=True, ours=True),  # train holds its one node drained by us
        node("a2", "train", "infer"),  # in train too (overlapping pools): withheld
        node("b1", "infer"),
        node("b2", "infer"),  # infer's one goes to b1 first (name order)
        node("p1", "train", drained=True, reason="person"),  # a person's drain does not use our budget
    ]
    health = [failing("a2"), failing("b1"), failing("b2")]
    assert run(health, nodes, policy=policy) == [
        ("a2", "drain", "budget_pool"),
        ("b1", "drain", None),
        ("b2", "drain", "budget_pool"),
    ]


def test_cluster_budget_and_ratio() -> None:
    policy = replace(POLICY, max_cluster_ratio=0.25)  # 8 nodes: 2 at once
    nodes = [node(f"n{i}", f"p{i}") for i in range(8)]
    nodes[0] = node("n0", "p0", drained=True, ours=True)
    health = [failing("n1"), failing("n2"), failing("n3")]
    assert run(health, nodes, policy=policy) == [
        ("n1", "drain", None),
        ("n2", "drain", "budget_cluster"),
        ("n3", "drain", "budget_cluster"),
    ]


@pytest.mark.parametrize(
    ("nodes", "max_nodes", "ratio", "limit"),
    [(8, 4, 0.25, 2), (8, 1, 1.0, 1), (3, 4, 0.1, 1), (10, 4, 0.3, 3), (0, 4, 1.0, 0), (8, 0, 1.0, 0), (8, 4, 0, 0)],
)
def test_budget_limit(nodes: int, max_nodes: int, ratio: float, limit: int) -> None:
    assert budget_limit(nodes, max_nodes, ratio) == limit


def test_resumes_come_first_and_free_no_budget_before_they_are_done() -> None:
    policy = replace(POLICY, max_pool_nodes=1)
    nodes = [node("a", drained=True, ours=True), node("b")]
    assert run([healthy("a"), failing("b")], nodes, policy=policy) == [
        ("a", "resume", None),
        ("b", "drain", "budget_pool"),  # the resume may still fail: the budget counts what the scheduler shows
    ]


def test_two_copies_given_the_same_inputs_decide_the_same() -> None:
    nodes = [node(f"n{i}", "train" if i % 2 else "infer") for i in range(6)]
    health = {f"n{i}": failing(f"n{i}") for i in range(6)}
    seen = {name: Seen(failing_since=NOW - 400) for name in health}
    policy = replace(POLICY, max_pool_nodes=2, max_actions=3)
    first = decide(health, nodes, seen, now=NOW, policy=policy)
    second = decide(dict(reversed(health.items())), list(reversed(nodes)), seen, now=NOW, policy=policy)
    assert first == second and sum(d.withheld is None for d in first) == 3


def test_observe_keeps_the_first_time_and_starts_over_on_any_change() -> None:
    seen = observe({}, {"a": failing("a"), "b": healthy("b")}, 100.0)
    assert seen == {"a": Seen(failing_since=100.0), "b": Seen(healthy_since=100.0)}
    seen = observe(seen, {"a": failing("a"), "b": healthy("b")}, 130.0)
    assert seen == {"a": Seen(failing_since=100.0), "b": Seen(healthy_since=100.0)}
    seen = observe(seen, {"a": healthy("a"), "b": NodeHealth("b", healthy=False, drain=False)}, 160.0)
    assert seen == {"a": Seen(healthy_since=160.0)}  # b degraded: neither failing a drain check nor healthy
    assert observe(seen, {}, 190.0) == {}  # silent: the evidence starts over


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_pool_ratio"):
        Policy(max_pool_ratio=1.5)
    with pytest.raises(ValueError, match="max_actions"):
        Policy(max_actions=-1)
