"""The records passed between the stages of ``mfumon remediate``: what the aggregator says about a node's health,
what the scheduler says about the node, the policy, and each decision.

Field meanings are fixed here; the aggregator client, the scheduler drivers and the decision table only build or
read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "REASON_PREFIX",
    "Action",
    "Decision",
    "NodeHealth",
    "Outcome",
    "Policy",
    "SchedulerNode",
    "Seen",
]

#: Every Slurm reason (and the value of every Kubernetes taint) the loop writes starts with this: a drain whose
#: reason does not is a person's, and the loop never touches it.
REASON_PREFIX = "mfumon:"

Action = Literal["drain", "resume"]
Outcome = Literal["done", "failed", "dry_run", "withheld"]


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """A node as the aggregator sees it (``GET /v1/nodes``): absent from the lists means healthy or unknown."""

    name: str
    healthy: bool  # passes every check it reports
    drain: bool  # fails a check that needs a drain
    drain_checks: tuple[str, ...] = ()  # the failing drain checks, sorted
    gpus: tuple[int, ...] = ()  # indexes of the GPUs failing a drain check


@dataclass(frozen=True, slots=True)
class SchedulerNode:
    """A node as the scheduler sees it now."""

    name: str
    pools: tuple[str, ...]  # Slurm partitions, node-pool label: a node may be in several
    drained: bool  # out of scheduling: drained/draining (Slurm), cordoned (Kubernetes), or down
    ours: bool  # drained by this loop: our reason prefix (Slurm) or our taint (Kubernetes)
    reason: str | None = None  # the scheduler's reason, as shown


@dataclass(frozen=True, slots=True)
class Seen:
    """Since when (this copy's clock) a node has been on the drain list, or passing every check; None: not now."""

    failing_since: float | None = None
    healthy_since: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """The rails. Budgets count the nodes drained *by this loop* (a person's drains are theirs)."""

    drain_after_seconds: float = 300.0
    """A node must stay on the drain list this long before it is drained (hysteresis, rising edge)."""
    resume_after_seconds: float = 900.0
    """A node drained by the loop must pass every check this long before it is resumed (hysteresis, falling edge)."""
    max_pool_nodes: int = 2
    """At most this many nodes of one pool drained by the loop at once."""
    max_pool_ratio: float = 0.1
    """At most this share of a pool's nodes (rounded down, but at least one node) drained by the loop at once."""
    max_cluster_nodes: int = 10
    """At most this many nodes of the cluster drained by the loop at once."""
    max_cluster_ratio: float = 0.05
    """At most this share of the cluster's nodes (rounded down, but at least one) drained by the loop at once."""
    max_actions: int = 5
    """Rate limit: at most this many drains and resumes done within ``rate_window_seconds``."""
    rate_window_seconds: float = 3600.0

    def __post_init__(self) -> None:
        for name in ("drain_after_seconds", "resume_after_seconds", "rate_window_seconds"):
            if getattr(self, name) < 0:
                raise ValueError(f"remediate: {name} must be >= 0")
        for name in ("max_pool_nodes", "max_cluster_nodes", "max_actions"):
            if getattr(self, name) < 0:
                raise ValueError(f"remediate: {name} must be >= 0")
        for name in ("max_pool_ratio", "max_cluster_ratio"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"remediate: {name} must be between 0 and 1")


@dataclass(frozen=True, slots=True)
class Decision:
    """One thing the loop does, or would do, or was stopped from doing, for one node."""

    node: str
    action: Action
    reason: str  # the failing checks (drain) or "healthy" (resume)
    withheld: str | None = None  # the rail that stopped it: kill_switch, not_ours, rate_limit, budget_pool, ...
    checks: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    detail: str = ""
    gpus: tuple[int, ...] = field(default=())
    failing_since: float | None = None  # a drain: since when this copy has seen the node on the drain list
