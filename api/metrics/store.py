"""``/metrics`` rendering that stays cheap as the cluster grows: the per-object cache and the per-scrape join.

A node's sample lines are rendered once per scrape interval, ahead of the scrape (soon after the node's last push
before it), and again only by a scrape that finds them older than the node; a job's once per change (see
MetricsRenderer). The resource modules render them (:mod:`~mfumon.api.metrics.node`, :mod:`~mfumon.api.metrics.job`);
they are cached here as bytes grouped by metric family; a scrape joins the cached pieces family by family and
renders only the per-job GPU accounts and the few summary series afresh (cluster, self, health, durable,
capacity). Series of nodes and jobs that are no longer in the snapshot (silent, ended) are simply not joined: they
vanish.
``?shard=I&shards=N`` joins only the nodes of one shard. What a family is and how its lines are written is the
resource modules' business; this module only decides when to render and what to join.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mfumon.api.metrics._text import Family
from mfumon.api.metrics.capacity import render_capacity
from mfumon.api.metrics.cluster import render_cluster
from mfumon.api.metrics.collective import render_collectives
from mfumon.api.metrics.cost import render_cost
from mfumon.api.metrics.durable import render_durable
from mfumon.api.metrics.health import HEALTH_FAMILIES, render_health_summary
from mfumon.api.metrics.job import JOB_FAMILIES, Chunk, render_job, render_job_gpus
from mfumon.api.metrics.node import GPU_FAMILIES, GpuLines, render_node
from mfumon.api.metrics.regression import render_regressions
from mfumon.api.metrics.remediation import render_remediation
from mfumon.api.metrics.self_metrics import SelfMetrics, render_self_metrics
from mfumon.api.state.aggregate import JobAccount, Summary
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import JobView, NodeView

#: How long the renderer keeps the event loop per turn while nothing else waits for it: a few nodes (~0.1 ms each),
#: so a turn of the loop (a poll for I/O, ~10 us) is not paid for every node. While requests keep the loop busy (a
#: turn took longer than RENDER_IDLE_TURN_S to come back), it renders one node per turn: ingest first.
RENDER_TURN_S = 0.0005
RENDER_IDLE_TURN_S = 0.0002
#: How long a scrape's renders keep the event loop per turn (:meth:`MetricsRenderer.catch_up`): a push arriving
#: meanwhile waits this long at most; an unsharded scrape of 100,000 GPUs takes about twice its renders' time.
SCRAPE_TURN_S = 0.002


def shard_of(node: str, shards: int) -> int:
    """The scrape shard a node's series belong to: a stable hash (the same in every replica and release)."""
    return zlib.crc32(node.encode()) % shards


@dataclass(frozen=True, slots=True)
class _Cached:
    key: Any  # what the chunk was rendered from: a node's revision, a job's (updated_at, baseline)
    chunk: dict[str, bytes]
    crc: int = 0  # nodes: zlib.crc32 of the name, for shard_of
    gpu_lines: GpuLines | None = None  # nodes: their GPUs' lines, to render the next push from


def _encoded(chunk: Chunk) -> dict[str, bytes]:
    return {name: text.encode() for name, text in chunk.items()}


@functools.cache
def _header(family: Family) -> bytes:
    return family.header().encode()


class MetricsRenderer:
    """Holds every node's and job's rendered series; safe for concurrent scrapes and writers.

    Series are rendered ahead of scrapes, not when they are scraped, so a scrape joins cached bytes family by family
    and renders afresh only the per-job GPU accounts and the summary, which derive from the whole snapshot. A job's
    series are rendered when its view is taken (:meth:`prepare_job`). A node's are rendered by
    :meth:`keep_rendering`, a task on the event loop that renders the nodes marked changed (:meth:`node_changed`,
    called by the state for every view it takes, from a push or another replica), a few per turn of the loop while
    it is otherwise idle and one per turn while requests keep it busy, ingest first. It renders a node **once per
    scrape interval**, not once per push (:meth:`node_changed`): soon after the node's last push before the next
    scrape (predicted from the node's push interval and the scrape interval so far), and a node rendered ahead of
    that scrape already is left to it. A scrape (of everything, or of the node's shard) renders whatever it finds
    older than its node, so what it serves is always current: when pushes or scrapes come off their beat, it
    renders those nodes itself, once. So a node that pushes k times between two scrapes is rendered once (twice
    at most), never k times; with no scrape at all, once. This is kube-state-metrics' way (render an object when it
    changes, join per scrape) with renders capped by the scrape rate, as Prometheus' remote-write receiver renders
    nothing per request.
    """

    def __init__(
        self,
        self_metrics: SelfMetrics,
        refresh_stats: Callable[[], tuple[float, int]],
        flush_stats: Callable[[], tuple[int, float, float, int]] = lambda: (0, 0.0, 0.0, 0),
        baseline_of: Callable[[str], float | None] = lambda signature: None,
        clock: Callable[[], float] = time.monotonic,
        nvlink_of: Callable[[NodeView], float | None] = lambda node: None,
    ) -> None:
        self._clock = clock  # for the push and scrape intervals
        self._self_metrics = self_metrics
        self._refresh_stats = refresh_stats
        self._flush_stats = flush_stats  # queued nodes, age of the oldest, last flush seconds, flush errors
        self._baseline_of = baseline_of  # signature -> baseline MFU held now
        self._nvlink_of = nvlink_of  # a node -> its device's NVLink figure (collective_ranks.nvlink_of)
        self._lock = threading.Lock()
        self._nodes: dict[str, _Cached] = {}
        self._jobs: dict[str, _Cached] = {}
        self._job_gpus: dict[str, _Cached] = {}
        self._changed: dict[str, None] = {}  # nodes to render, oldest change first
        self._ahead: set[str] = set()  # nodes rendered ahead of a scrape that no scrape (of their shard) served yet
        self._deferred: set[str] = set()  # nodes left to the next scrape, which renders them if still stale
        self._changed_at: dict[str, float] = {}  # each node's last change (monotonic): its push interval
        self._scraped_at: tuple[float, float] | None = None  # the last two scrapes (monotonic): the scrape interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._wake: asyncio.Event | None = None
        self.forgotten = 0  # chunks dropped because their node or job is gone (see mfumon.api.core.memory.Trimmer)
        self.renders = {
            "node": 0,
            "job": 0,
            "job_gpus": 0,
        }  # how many chunks were (re)rendered: lets tests see the cache work

    # -- when a view changes -------------------------------------------------------------------------------------

    def node_changed(self, name: str) -> None:
        """Mark a node for rendering, or leave it to the next scrape; O(1), from any thread, without waking the
        renderer when it is left.

        Left to the next scrape: a node rendered ahead of it already (the scrape renders its newest view), and a
        node whose next push is due before the next scrape is (its push interval so far, the scrape interval so
        far): that push, the last before the scrape, is the one rendered ahead. So a node that pushes k times
        between two scrapes is rendered once, soon after its last push before the scrape, and the scrape only
        joins it; if its pushes or the scrapes come off their beat, the scrape renders it, once.
        """
        now = self._clock()
        with self._lock:
            last, self._changed_at[name] = self._changed_at.get(name), now
            if name in self._ahead or (last is not None and self._due_before_scrape(now + (now - last))):
                self._deferred.add(name)
                return
            if name in self._changed:
                return
            self._changed[name] = None
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not wake.is_set():
            try:
                if threading.get_ident() == self._loop_thread:
                    wake.set()
                else:
                    loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop has closed: the process is stopping
                pass

    def _due_before_scrape(self, when: float) -> bool:
        """Whether ``when`` comes before the next scrape, by the interval between the last two (False without)."""
        if self._scraped_at is None:
            return False
        before, last = self._scraped_at
        return when < last + (last - before)

    def waiting(self) -> int:
        """Nodes marked changed that the renderer has not reached yet."""
        with self._lock:
            return len(self._changed)

    def pending(self) -> int:
        """Nodes whose newest view is not rendered: waiting, or left to the next scrape."""
        with self._lock:
            return len(self._changed) + len(self._deferred)

    async def keep_rendering(self, node_of: Callable[[str], NodeView | None]) -> None:
        """Render changed nodes until cancelled: RENDER_TURN_S of them per turn of the event loop while it is
        otherwise idle, one per turn while it is not (see the class docstring)."""
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        self._wake = asyncio.Event()
        if self.waiting():  # changed before this task started: the state loaded at start
            self._wake.set()
        clock = time.perf_counter
        while True:
            await self._wake.wait()
            self._wake.clear()
            turn_ends = clock() + RENDER_TURN_S
            while True:
                with self._lock:
                    name = next(iter(self._changed), None)
                    if name is None:
                        break
                    del self._changed[name]
                view = node_of(name)
                cached = self._nodes.get(name)  # a scrape may have rendered it meanwhile
                if view is not None and (cached is None or cached.key != view.revision):
                    if name not in self._ahead:
                        self.prepare_node(view)
                    else:  # rendered ahead of the next scrape already: that scrape renders it (once), not every push
                        with self._lock:
                            self._deferred.add(name)
                if clock() >= turn_ends:
                    yielded = clock()
                    await asyncio.sleep(0)  # requests ready meanwhile come first
                    back = clock()
                    turn_ends = back + (RENDER_TURN_S if back - yielded < RENDER_IDLE_TURN_S else 0.0)

    def prepare_node(self, node: NodeView) -> None:
        """Render a node's series now, so that scrapes only join them."""
        cached = self._render_node(node, self._nodes.get(node.name))
        with self._lock:
            held = self._nodes.get(node.name)
            if held is None or held.key <= node.revision:  # a slower thread never puts back an older render
                self._nodes[node.name] = cached
                self._ahead.add(node.name)
                self._deferred.discard(node.name)
            self.renders["node"] += 1

    def prepare_job(self, job: JobView) -> None:
        signature = job.latest.signature if job.latest else None
        baseline_mfu = self._baseline_of(signature) if signature else None
        cached = _Cached((job.updated_at, baseline_mfu), _encoded(render_job(job, baseline_mfu)))
        with self._lock:
            held = self._jobs.get(job.job_id)
            if held is None or held.key[0] <= job.updated_at:
                self._jobs[job.job_id] = cached
            self.renders["job"] += 1

    # -- a scrape -----------------------------------------------------------------------------------------------

    async def catch_up(self, node_of: Callable[[str], NodeView | None], shard: tuple[int, int] | None = None) -> int:
        """Render, on the event loop and SCRAPE_TURN_S at a time, the nodes a scrape is about to join whose newest
        view is not rendered yet (of ``shard`` only); how many it rendered.

        A scrape's own render runs on a worker thread, and a thread running Python beside the event loop slows
        every request the loop serves: each time the loop waits for I/O it lets go of the GIL and then waits up to
        the switch interval to have it back. At 100,000 GPUs an unsharded scrape rendering every node there took
        3.6 s, and pushes meanwhile waited up to 1.5 s. Here those renders take turns with requests instead, so a
        push waits one turn at most, and the thread is left with joining cached bytes.
        """
        with self._lock:
            names = [*self._changed, *self._deferred]
        if shard is not None:
            index, count = shard
            names = [name for name in names if self._crc(name) % count == index]
        clock = time.perf_counter
        turn_ends = clock() + SCRAPE_TURN_S
        rendered = 0
        for name in names:
            view = node_of(name)
            cached = self._nodes.get(name)
            if view is not None and (cached is None or cached.key != view.revision):
                self.prepare_node(view)
                rendered += 1
            if clock() >= turn_ends:
                await asyncio.sleep(0)  # requests ready meanwhile come first
                turn_ends = clock() + SCRAPE_TURN_S
        return rendered

    def render(self, snapshot: Snapshot, summary: Summary, shard: tuple[int, int] | None = None) -> bytes:
        """The exposition; with ``shard=(i, n)`` only the nodes and GPUs of shard ``i`` of ``n``, and the job,
        pool, team, cluster and self series on shard 0 only.

        Whatever it finds stale it renders outside the lock, which every push takes (:meth:`node_changed`): a push
        never waits for a scrape's renders, only for its bookkeeping."""
        started = time.perf_counter()
        everything = shard is None or shard[0] == 0
        nodes: Sequence[NodeView] = snapshot.nodes
        if shard is not None:  # only this shard's nodes are joined, so only they are rendered if stale
            index, count = shard
            nodes = [n for n in nodes if self._crc(n.name) % count == index]
        with self._lock:
            now = self._clock()
            self._scraped_at = (self._scraped_at[1] if self._scraped_at else now, now)
        node_chunks = [self._node_chunk(node) for node in nodes]
        alive = {n.name for n in snapshot.nodes}
        served = alive if shard is None else {n.name for n in nodes}
        job_chunks: list[_Cached] = []
        if everything:
            job_chunks = [self._job_chunk(job, snapshot) for job in snapshot.jobs]
            jobs = {j.job_id: j for j in snapshot.jobs}
            job_chunks += [self._job_gpus_chunk(i, jobs.get(i), account) for i, account in summary.jobs.items()]
        with self._lock:
            self._forget(self._nodes, alive)
            # Every node served may be rendered ahead of the next scrape again; one that changed while this scrape
            # rendered is still left to the next (it served the view before)
            if shard is None:
                self._ahead.clear()
            else:
                self._ahead -= served
            self._deferred = {n for n in self._deferred if n not in served or self._changed_at.get(n, now) > now}
            if everything:
                self._forget(self._jobs, set(jobs))
                self._forget(self._job_gpus, set(summary.jobs))
        parts: list[bytes] = []
        _join_families(parts, JOB_FAMILIES, [c.chunk for c in job_chunks])
        _join_families(parts, GPU_FAMILIES, [c.chunk for c in node_chunks])
        _join_families(parts, HEALTH_FAMILIES, [c.chunk for c in node_chunks])
        if everything:
            parts.append(render_cluster(summary).encode())
            parts.append(self._render_self().encode())
            parts.append(render_health_summary(snapshot).encode())
            visible = [node.name for node in snapshot.nodes]
            parts.append(render_durable(snapshot.counters, jobs=summary.jobs, nodes=visible).encode())
            parts.append(render_cost(snapshot.counters, snapshot.prices, jobs=summary.jobs).encode())
            parts.append(render_collectives(snapshot.nodes, summary.jobs, self._nvlink_of).encode())
            parts.append(render_remediation(snapshot.counters).encode())
            parts.append(render_regressions(snapshot.regressions).encode())
            parts.append(render_capacity(snapshot, summary).encode())
        body = b"".join(parts)
        self._self_metrics.last_scrape_duration_seconds = time.perf_counter() - started
        return body

    def _crc(self, name: str) -> int:
        cached = self._nodes.get(name)
        return cached.crc if cached is not None else zlib.crc32(name.encode())

    def _node_chunk(self, node: NodeView) -> _Cached:
        cached = self._nodes.get(node.name)
        if cached is not None and cached.key == node.revision:
            return cached
        cached = self._render_node(node, cached)
        with self._lock:
            held = self._nodes.get(node.name)
            if held is None or held.key <= node.revision:  # a push's newer render stays
                self._nodes[node.name] = cached
            self.renders["node"] += 1
        return cached

    @staticmethod
    def _render_node(node: NodeView, held: _Cached | None) -> _Cached:
        chunk, gpu_lines = render_node(node, held.gpu_lines if held is not None else None)
        return _Cached(node.revision, chunk, zlib.crc32(node.name.encode()), gpu_lines)

    def _job_chunk(self, job: JobView, snapshot: Snapshot) -> _Cached:
        signature = job.latest.signature if job.latest else None
        baseline = snapshot.baselines.get(signature) if signature else None
        baseline_mfu = baseline.mfu if baseline else None
        key = (job.updated_at, baseline_mfu)
        cached = self._jobs.get(job.job_id)
        if cached is not None and cached.key == key:
            return cached
        cached = _Cached(key, _encoded(render_job(job, baseline_mfu)))
        with self._lock:
            held = self._jobs.get(job.job_id)
            if held is None or held.key[0] <= job.updated_at:
                self._jobs[job.job_id] = cached
            self.renders["job"] += 1
        return cached

    def _job_gpus_chunk(self, job_id: str, job: JobView | None, account: JobAccount) -> _Cached:
        key = (job.updated_at if job is not None else None, account)
        cached = self._job_gpus.get(job_id)
        if cached is not None and cached.key == key:
            return cached
        cached = _Cached(key, _encoded(render_job_gpus(job_id, job, account)))
        with self._lock:
            self._job_gpus[job_id] = cached
            self.renders["job_gpus"] += 1
        return cached

    def _forget(self, cache: dict[str, _Cached], alive: set[str]) -> None:
        if len(cache) > len(alive):
            gone = [k for k in cache if k not in alive]
            for key in gone:
                del cache[key]
                if cache is self._nodes:  # and what the renderer knew of the node's pushes
                    self._ahead.discard(key)
                    self._deferred.discard(key)
                    self._changed_at.pop(key, None)
            self.forgotten += len(gone)

    def _render_self(self) -> str:
        """The aggregator's own series, with this store's render counts and backlog."""
        with self._lock:
            renders = sorted(self.renders.items())
        return render_self_metrics(
            self._self_metrics, renders, self.pending(), self._refresh_stats(), self._flush_stats()
        )


def _join_families(parts: list[bytes], families: dict[str, Family], chunks: list[dict[str, bytes]]) -> None:
    for name, family in families.items():
        body = b"".join([chunk[name] for chunk in chunks if name in chunk])
        if body:
            parts.append(_header(family))
            parts.append(body)
