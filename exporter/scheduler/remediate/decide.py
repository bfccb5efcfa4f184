"""The decision table of ``mfumon remediate``: pure functions from what the aggregator and the scheduler say now
(and since when this copy has seen it) to drains, resumes and actions withheld by a rail. No I/O here.

Each node is looked at alone, in this order; the first row that matches decides:

====  ==========================================================  ==================================================
 row   condition                                                   action
====  ==========================================================  ==================================================
 1     on the drain list, drained or cordoned by someone else      nothing; withheld ``not_ours`` (recorded)
 2     on the drain list, unknown to the scheduler                 nothing; withheld ``not_in_scheduler``
 3     on the drain list for less than ``drain_after_seconds``     wait (hysteresis)
 4     on the drain list for ``drain_after_seconds``, not drained  **drain**, unless a rail withholds it
 5     drained by us, failing any check or unknown to aggregator   keep drained
 6     drained by us, passing every check < ``resume_after``       wait (hysteresis)
 7     drained by us, passing every check >= ``resume_after``      **resume**, unless a rail withholds it
 8     anything else (healthy and schedulable; a person's drain)   nothing
====  ==========================================================  ==================================================

Rails, checked in this order on each drain and resume: the kill switch (``kill_switch``: every action withheld), the
rate limit (``rate_limit``: at most ``max_actions`` done in ``rate_window_seconds``, counted from the aggregator's
audit, so every copy counts the same), then for drains only the budgets (``budget_pool`` for any pool of the node,
``budget_cluster``) over the nodes the scheduler shows drained by us. Resumes come first, then drains, each in
node-name order, so two copies given the same inputs decide the same.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from mfumon.exporter.scheduler.remediate.model import Decision, NodeHealth, Policy, SchedulerNode, Seen

__all__ = ["budget_limit", "decide", "observe"]


def observe(previous: Mapping[str, Seen], health: Mapping[str, NodeHealth], now: float) -> dict[str, Seen]:
    """Carry forward since when each node has been on the drain list or passing every check.

    A node the aggregator does not describe (silent, unknown) starts over: evidence must be continuous.
    """
    seen: dict[str, Seen] = {}
    for name, node in health.items():
        held = previous.get(name, Seen())
        if node.drain:
            seen[name] = Seen(failing_since=held.failing_since if held.failing_since is not None else now)
        elif node.healthy:
            seen[name] = Seen(healthy_since=held.healthy_since if held.healthy_since is not None else now)
    return seen


def budget_limit(nodes: int, max_nodes: int, max_ratio: float) -> int:
    """How many of ``nodes`` the loop may hold drained at once: the node limit, and the ratio rounded down but at
    least one node (zero when either limit is zero)."""
    if nodes <= 0 or max_nodes <= 0 or max_ratio <= 0:
        return 0
    return min(max_nodes, max(1, math.floor(max_ratio * nodes + 1e-9)))


def _reason(checks: Iterable[str]) -> str:
    return ",".join(checks) or "drain"


def decide(
    health: Mapping[str, NodeHealth],
    nodes: Sequence[SchedulerNode],
    seen: Mapping[str, Seen],
    *,
    now: float,
    policy: Policy,
    actions_done_recently: int = 0,
    kill_switch: str | None = None,
) -> list[Decision]:
    """Every drain and resume due now, and every one withheld by a rail (see the module's table).

    Args:
        health: the aggregator's view of the drain list, the unhealthy nodes and the nodes drained by us.
        nodes: every node the scheduler lists.
        seen: :func:`observe`'s output for this round.
        actions_done_recently: drains and resumes done within the rate window (from the audit).
        kill_switch: why actions are stopped (the switch that is on), or None.
    """
    by_name = {n.name: n for n in nodes}
    pool_sizes: Counter[str] = Counter(pool for n in nodes for pool in n.pools)
    ours_by_pool: Counter[str] = Counter(pool for n in nodes if n.drained and n.ours for pool in n.pools)
    ours_total = sum(1 for n in nodes if n.drained and n.ours)
    cluster_limit = budget_limit(len(nodes), policy.max_cluster_nodes, policy.max_cluster_ratio)
    done = actions_done_recently
    decisions: list[Decision] = []

    def rail(decision: Decision) -> Decision | None:
        """The decision withheld by the first rail that stops it, or None when none does."""
        if kill_switch is not None:
            return replace(decision, withheld="kill_switch", detail=kill_switch)
        if done >= policy.max_actions:
            window = f"{policy.max_actions} actions in {policy.rate_window_seconds:g} s"
            return replace(decision, withheld="rate_limit", detail=f"rate limit reached ({window})")
        if decision.action == "drain":
            for pool in decision.pools:
                limit = budget_limit(pool_sizes[pool], policy.max_pool_nodes, policy.max_pool_ratio)
                if ours_by_pool[pool] >= limit:
                    held = f"{ours_by_pool[pool]} of {pool_sizes[pool]}"
                    detail = f"pool {pool}: {held} nodes drained by us (limit {limit})"
                    return replace(decision, withheld="budget_pool", detail=detail)
            if ours_total >= cluster_limit:
                detail = f"cluster: {ours_total} of {len(nodes)} nodes drained by us (limit {cluster_limit})"
                return replace(decision, withheld="budget_cluster", detail=detail)
        return None

    def admit(decision: Decision) -> None:
        nonlocal done, ours_total
        stopped = rail(decision)
        if stopped is not None:
            decisions.append(stopped)
            return
        done += 1
        if decision.action == "drain":
            ours_total += 1
            ours_by_pool.update(decision.pools)
        decisions.append(decision)

    for node in sorted(nodes, key=lambda n: n.name):  # rows 5-7: nodes drained by us
        if not (node.drained and node.ours):
            continue
        state = health.get(node.name)
        since = seen.get(node.name, Seen()).healthy_since
        if state is None or not state.healthy or since is None:
            continue  # row 5
        if now - since < policy.resume_after_seconds:
            continue  # row 6
        detail = f"passing every check for {now - since:.0f} s"
        admit(Decision(node.name, "resume", "healthy", pools=node.pools, detail=detail))  # row 7

    for name in sorted(n for n, h in health.items() if h.drain):  # rows 1-4: the drain list
        state = health[name]
        listed = by_name.get(name)
        drain = Decision(name, "drain", _reason(state.drain_checks), checks=state.drain_checks, gpus=state.gpus)
        if listed is None:
            decisions.append(replace(drain, withheld="not_in_scheduler", detail="the scheduler lists no such node"))
            continue
        drain = replace(drain, pools=listed.pools)
        if listed.drained:
            if not listed.ours:  # row 1
                detail = f"drained by someone else: {listed.reason or 'no reason given'}"
                decisions.append(replace(drain, withheld="not_ours", detail=detail))
            continue
        since = seen.get(name, Seen()).failing_since
        if since is None or now - since < policy.drain_after_seconds:
            continue  # row 3
        admit(replace(drain, detail=f"on the drain list for {now - since:.0f} s", failing_since=since))  # row 4
    return decisions
