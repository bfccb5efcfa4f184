"""The demo's remediation loop: ``mfumon remediate`` in dry run over the simulated cluster's nodes.

The simulated scheduler lists every node of the cluster (its pool as its only partition, none drained), so the
real decision table and loop record, for each node on the drain list, the drain they would do
(``outcome="dry_run"``) in the aggregator's audit and in ``mfumon_remediation_actions_total``.
"""

from __future__ import annotations

from mfumon.exporter.demo.simcluster import ClusterSpec
from mfumon.exporter.scheduler.remediate.aggregator import Aggregator
from mfumon.exporter.scheduler.remediate.loop import KillSwitch, Remediator
from mfumon.exporter.scheduler.remediate.model import Action, Decision, Policy, SchedulerNode
from mfumon.exporter.transport import FreshConnectionRetry

__all__ = ["SimSchedulerNodes", "dry_run_remediator"]


class SimSchedulerNodes:
    """A scheduler that lists the simulated nodes and is never asked to act (the loop runs dry)."""

    kind = "slurm"

    def __init__(self, cluster: ClusterSpec) -> None:
        self._nodes = [SchedulerNode(n.name, pools=(n.pool,), drained=False, ours=False) for n in cluster.nodes]

    def action_name(self, action: Action) -> str:
        return action

    def read_nodes(self) -> list[SchedulerNode]:
        return list(self._nodes)

    def drain(self, decision: Decision) -> None:
        raise RuntimeError("the demo's remediation runs dry")

    def resume(self, decision: Decision) -> None:
        raise RuntimeError("the demo's remediation runs dry")


def dry_run_remediator(url: str, cluster: ClusterSpec, token: str | None = None) -> tuple[Remediator, Aggregator]:
    """The loop in dry run, drains due as soon as a node is on the drain list; close the aggregator when done."""
    aggregator = Aggregator(url, token=token, timeout_seconds=5.0, transport=FreshConnectionRetry())
    policy = Policy(drain_after_seconds=0, max_pool_ratio=1.0, max_cluster_ratio=1.0)
    remediator = Remediator(
        SimSchedulerNodes(cluster), aggregator, policy=policy, act=False, kill_switch=KillSwitch(environ={})
    )
    return remediator, aggregator
