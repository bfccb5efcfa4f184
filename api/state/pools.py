"""Which pools a node is in: the scheduler's pools where an adapter defines them, else its exporter's ``--pool``.

A scheduler adapter (``mfumon scheduler``) may list the scheduler's own pools with their nodes: Slurm partitions,
Kubernetes node pools. Partitions overlap (a ``train`` and an ``infer`` partition over the same nodes is common), so a
node may be in several pools; a node no fresh adapter lists keeps the one pool its exporter names. Every pool an
adapter lists exists, with or without nodes that report. Cluster totals count each node once whatever its pools, so
sums over pools of GPUs, free GPUs or idle time count a shared node once per pool (README, "Pools").

Only adapters that synced within ``MFUMON_SCHEDULER_TTL_SECONDS`` count: when the adapter goes silent, exporters'
``--pool`` is the source again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mfumon.api.state.views import NodeView, SourceView

__all__ = ["PoolMap", "PoolsKey", "pool_map", "pools_key"]

#: What :meth:`PoolMap.key` compares: each fresh source's pools, by source name.
PoolsKey = tuple[tuple[str, tuple[tuple[str, frozenset[str]], ...]], ...]


@dataclass(frozen=True, slots=True)
class PoolMap:
    """The scheduler's pools: every pool listed, and each listed node's pools (by name)."""

    listed: tuple[str, ...] = ()
    by_node: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def of(self, node: NodeView) -> tuple[str, ...]:
        """The node's pools: the scheduler's that list it, else its exporter's ``--pool`` (or none)."""
        pools = self.by_node.get(node.name)
        if pools is not None:
            return pools
        return (node.pool,) if node.pool else ()


def pools_key(sources: Iterable[SourceView]) -> PoolsKey:
    """What the map is built from; equal keys build equal maps (a sync that changed no pool rebuilds nothing)."""
    return tuple(sorted((s.name, s.pools) for s in sources if s.pools is not None))


def pool_map(key: PoolsKey) -> PoolMap:
    """The pools of the sources in ``key`` (:func:`pools_key`); two sources naming one pool add their nodes up."""
    members: dict[str, set[str]] = {}
    for _source, pools in key:
        for name, nodes in pools:
            members.setdefault(name, set()).update(nodes)
    by_node: dict[str, list[str]] = {}
    for name in sorted(members):
        for node in members[name]:
            by_node.setdefault(node, []).append(name)
    return PoolMap(listed=tuple(sorted(members)), by_node={node: tuple(p) for node, p in by_node.items()})
