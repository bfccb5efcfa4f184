"""The per-process cluster view: nodes, jobs and baselines in memory, kept equal to the database.

Writes made by this process are applied here right after they commit; writes made by other replicas arrive
through :mod:`mfumon.api.state.refresh`. Readers take a consistent snapshot under the lock and work outside it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from mfumon.api.pricing import NO_PRICES, PriceList
from mfumon.api.regressions.analysis import Change
from mfumon.api.state.counters import DurableCounters
from mfumon.api.state.energy import derive_power
from mfumon.api.state.health import advance
from mfumon.api.state.pools import PoolMap, PoolsKey, pool_map, pools_key
from mfumon.api.state.views import BaselineView, HistogramView, JobShare, JobView, NodeView, SourceView

_NEWER = object()  # apply_node's default: take the view if it is newer than the one held


@dataclass(slots=True)
class PoolHealthTotals:
    """Counters of one pool since this process started (Prometheus ``rate()``/``increase()`` handle restarts)."""

    idle_energy_joules: float = 0.0
    idle_gpu_seconds: float = 0.0
    gpu_faults: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one scrape or summary sees: only visible (not expired, not ended) nodes and jobs."""

    now: float
    nodes: tuple[NodeView, ...]
    jobs: tuple[JobView, ...]
    baselines: dict[str, BaselineView]
    pool_health: dict[str, PoolHealthTotals] = field(default_factory=dict)
    counters: DurableCounters = field(default_factory=DurableCounters)  # read at render time; they only grow
    sources: tuple[SourceView, ...] = ()  # every scheduler adapter that ever synced, fresh or not
    queue_waits: tuple[HistogramView, ...] = ()
    pools: PoolMap = field(default_factory=PoolMap)  # the fresh adapters' pools (mfumon.api.state.pools)
    regressions: tuple[Change, ...] = ()  # the software comparison's last result (mfumon.api.regressions)
    prices: PriceList = NO_PRICES  # the price list in effect (mfumon.api.services.prices)


class ClusterState:
    """Thread-safe holder of the latest views; O(1) per update, O(nodes + jobs) per snapshot."""

    def __init__(
        self,
        *,
        node_ttl_seconds: float,
        job_ttl_seconds: float,
        pending_job_ttl_seconds: float,
        health_window_seconds: float = 900.0,
        scheduler_ttl_seconds: float = 300.0,
    ) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeView] = {}
        self._jobs: dict[str, JobView] = {}
        self._baselines: dict[str, BaselineView] = {}
        self._baseline_versions: dict[str, int] = {}  # signature -> version last applied (resets included)
        self._job_nodes: dict[str, set[str]] = {}  # job_id -> nodes whose GPUs exporters attribute to it
        self._sources: dict[str, SourceView] = {}
        self._queue_waits: dict[tuple[str, str], HistogramView] = {}
        self._pools_key: PoolsKey = ()
        self._pools = PoolMap()  # built from the fresh sources' pools at each snapshot, when they changed
        self.scheduler_ttl_seconds = scheduler_ttl_seconds
        self._gpu_count = 0  # GPUs of the nodes held, for the cardinality limits
        self._open_jobs = 0  # jobs held that have not ended
        self._reserved: Counter[str] = Counter()  # job ids being created: writes past the limit check, not applied
        self.node_ttl_seconds = node_ttl_seconds
        self.job_ttl_seconds = job_ttl_seconds
        self.pending_job_ttl_seconds = pending_job_ttl_seconds
        self.health_window_seconds = health_window_seconds
        self._pool_health: dict[str, PoolHealthTotals] = {}
        self.counters = DurableCounters()
        # The software comparison's last result, replaced whole by the maintenance thread (one assignment: atomic).
        self.regressions: tuple[Change, ...] = ()
        # The price list in effect (mfumon.api.services.prices), replaced whole when it changes.
        self.prices: PriceList = NO_PRICES
        self.forgotten = 0  # nodes and jobs pruned so far (see mfumon.api.core.memory.Trimmer)
        # Called (outside the lock) with every view taken: the renderer renders it now, not at the next scrape.
        self.on_node: Callable[[NodeView], None] | None = None
        self.on_job: Callable[[JobView], None] | None = None

    # --- updates -------------------------------------------------------------------------------------------
    def apply_node(self, view: NodeView, *, replaces: NodeView | object | None = _NEWER) -> bool:
        """Hold ``view`` for its node; True when it was taken.

        By default a view is taken when it is newer (``revision``) than the one held, so a replica that reads a
        row late never steps back. With ``replaces`` it is taken only if the view held is still that one: a push
        builds its view from what it saw and builds again if another thread got in between (compare and swap).
        """
        with self._lock:
            held = self._nodes.get(view.name)
            if replaces is _NEWER:
                if held is not None and view.revision <= held.revision:
                    return False
            elif held is not replaces:
                return False
            derive_power(held, view)  # each GPU's mean power since its previous view
            view = advance(held, view, self.health_window_seconds)  # health needs the view it replaces
            self._count_pool_health(view)
            self._index_jobs(held, remove=True)
            self._gpu_count += len(view.gpus) - (len(held.gpus) if held is not None else 0)
            self._nodes[view.name] = view
            self._index_jobs(view, remove=False)
        if self.on_node is not None:
            self.on_node(view)
        return True

    def _count_pool_health(self, view: NodeView) -> None:
        # By the exporter's --pool, as mfumon_node_info{pool} that the fault-rate rules divide by: one pool per node,
        # so the cluster's rate (a sum over pools) counts each node once even where the scheduler's pools overlap.
        if view.pool is None or view.health is None:
            return
        totals = self._pool_health.setdefault(view.pool, PoolHealthTotals())
        totals.idle_energy_joules += view.health.idle_energy_joules
        totals.idle_gpu_seconds += view.health.idle_gpu_seconds
        totals.gpu_faults += view.health.faults

    def _index_jobs(self, node: NodeView | None, *, remove: bool) -> None:
        for job_id in node.shares if node is not None else ():
            nodes = self._job_nodes.setdefault(job_id, set())
            if remove:
                nodes.discard(node.name)  # type: ignore[union-attr]
                if not nodes:
                    del self._job_nodes[job_id]
            else:
                nodes.add(node.name)  # type: ignore[union-attr]

    def apply_job(self, view: JobView) -> None:
        with self._lock:
            held = self._jobs.get(view.job_id)
            if held is not None and view.updated_at < held.updated_at:
                return
            self._open_jobs += (view.status != "ended") - (held is not None and held.status != "ended")
            self._jobs[view.job_id] = view
        if self.on_job is not None:
            self.on_job(view)

    def apply_source(self, view: SourceView) -> None:
        with self._lock:
            held = self._sources.get(view.name)
            if held is None or view.updated_at >= held.updated_at:
                self._sources[view.name] = view

    def apply_queue_wait(self, view: HistogramView) -> None:
        """Keep the histogram with the most observations: counts only grow, whichever replica wrote them."""
        with self._lock:
            held = self._queue_waits.get((view.pool, view.team))
            if held is None or view.count >= held.count:
                self._queue_waits[(view.pool, view.team)] = view

    def source_revision(self, name: str) -> float | None:
        with self._lock:
            held = self._sources.get(name)
        return held.updated_at if held else None

    def apply_baseline(self, signature: str, version: int, view: BaselineView | None) -> None:
        """Hold a signature's baseline (``None``: it was reset) unless a later version of it was applied already:
        threads and polls may apply writes out of order."""
        with self._lock:
            if version < self._baseline_versions.get(signature, 0):
                return
            self._baseline_versions[signature] = version
            if view is None:
                self._baselines.pop(signature, None)
            else:
                self._baselines[signature] = view

    def job_revision(self, job_id: str) -> float | None:
        with self._lock:
            held = self._jobs.get(job_id)
        return held.updated_at if held else None

    def prune(self, now: float) -> None:
        """Forget what can no longer become visible, so memory tracks the live cluster, not its history."""
        with self._lock:
            for name in [n for n, v in self._nodes.items() if not self._node_visible(v, now)]:
                gone = self._nodes.pop(name)
                self._gpu_count -= len(gone.gpus)
                self._index_jobs(gone, remove=True)
                self.forgotten += 1
            for job_id in [j for j, v in self._jobs.items() if not self._job_visible(v, now)]:
                self._open_jobs -= self._jobs.pop(job_id).status != "ended"
                self.forgotten += 1

    # --- reads ---------------------------------------------------------------------------------------------
    def _node_visible(self, node: NodeView, now: float) -> bool:
        return now - node.last_seen_at <= self.node_ttl_seconds

    def _source_fresh(self, name: str, now: float) -> bool:
        source = self._sources.get(name)
        return source is not None and now - source.synced_at <= self.scheduler_ttl_seconds

    def _job_visible(self, job: JobView, now: float) -> bool:
        if job.status != "ended" and job.source is not None:
            if self._source_fresh(job.source, now):
                return True  # the scheduler still lists it, whether or not it reports
            if job.status == "pending":
                return False  # the adapter went silent: its queue is no longer known
        if job.status == "running":
            return now - (job.last_report_at or job.updated_at) <= self.job_ttl_seconds
        if job.status == "pending":
            return now - job.updated_at <= self.pending_job_ttl_seconds
        return False

    def snapshot(self, now: float) -> Snapshot:
        with self._lock:
            nodes = tuple(v for v in self._nodes.values() if self._node_visible(v, now))
            jobs = tuple(v for v in self._jobs.values() if self._job_visible(v, now))
            baselines = dict(self._baselines)
            pool_health = {
                pool: PoolHealthTotals(t.idle_energy_joules, t.idle_gpu_seconds, t.gpu_faults)
                for pool, t in self._pool_health.items()
            }
            sources = tuple(self._sources.values())
            queue_waits = tuple(self._queue_waits.values())
            pools = self._current_pools(now)
        return Snapshot(
            now=now,
            nodes=nodes,
            jobs=jobs,
            baselines=baselines,
            pool_health=pool_health,
            counters=self.counters,
            sources=sources,
            queue_waits=queue_waits,
            pools=pools,
            regressions=self.regressions,
            prices=self.prices,
        )

    def pools(self, now: float) -> PoolMap:
        """The pools nodes are in now (:mod:`mfumon.api.state.pools`), without a whole snapshot."""
        with self._lock:
            return self._current_pools(now)

    def _current_pools(self, now: float) -> PoolMap:
        """The fresh sources' pools (under the lock); rebuilt only when they changed, not at every scrape."""
        key = pools_key(s for s in self._sources.values() if self._source_fresh(s.name, now))
        if key != self._pools_key:
            self._pools_key, self._pools = key, pool_map(key)
        return self._pools

    def reserve_job(self, job_id: str, limit: int) -> bool:
        """Hold a place for a write that may start tracking ``job_id``; False when ``limit`` jobs not ended are
        held or being created. Check and reservation are one step, so concurrent creators cannot all pass a check
        made before any of them applied its job; :meth:`release_job` once the write applied it (or failed)."""
        with self._lock:
            if job_id not in self._jobs and job_id not in self._reserved:
                creating = sum(1 for j in self._reserved if j not in self._jobs)
                if self._open_jobs + creating >= limit:
                    return False
            self._reserved[job_id] += 1
            return True

    def release_job(self, job_id: str) -> None:
        with self._lock:
            self._reserved[job_id] -= 1
            if self._reserved[job_id] <= 0:
                del self._reserved[job_id]

    def sizes(self) -> tuple[int, int, int]:
        """Nodes, GPUs and jobs not ended that are held (visible or not yet pruned): what the cardinality limits
        count. O(1)."""
        with self._lock:
            return len(self._nodes), self._gpu_count, self._open_jobs

    def node(self, name: str) -> NodeView | None:
        with self._lock:
            return self._nodes.get(name)

    def baseline(self, signature: str) -> BaselineView | None:
        """The signature's baseline; None when it has none (never captured, or reset)."""
        with self._lock:
            return self._baselines.get(signature)

    def job_shares(self, job_id: str, now: float) -> list[tuple[NodeView, JobShare]]:
        """The GPUs exporters attribute to ``job_id``, per visible node; O(nodes of the job), not O(cluster)."""
        with self._lock:
            nodes = [self._nodes[name] for name in sorted(self._job_nodes.get(job_id, ()))]
        return [(node, node.shares[job_id]) for node in nodes if self._node_visible(node, now)]
