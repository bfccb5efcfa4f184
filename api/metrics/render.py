"""``/metrics`` rendering that stays cheap as the cluster grows.

Each node's and each job's sample lines are rendered once per change, soon after the change arrives (see
MetricsRenderer), and cached as bytes grouped by metric family; a scrape joins the cached pieces family by family
and renders only the per-job GPU accounts and the few summary series afresh. Series of nodes and jobs that are no
longer in the snapshot (silent, ended) are simply not joined: they vanish. ``?shard=I&shards=N`` joins only the
nodes of one shard.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from mfumon.api.accounting import CATEGORIES, CLUSTER_CATEGORIES, Ledger
from mfumon.api.metrics._text import escape_label_value, format_value, labels_text, sample_line
from mfumon.api.metrics.families import (
    CAPACITY_FAMILIES,
    DURABLE_FAMILIES,
    GPU_FAMILIES,
    HEALTH_FAMILIES,
    JOB_FAMILIES,
    SUMMARY_FAMILIES,
    Family,
)
from mfumon.api.metrics.gpu_lines import GpuLines, render_gpu_lines
from mfumon.api.metrics.health import render_health_summary, render_node_health
from mfumon.api.metrics.self_metrics import SelfMetrics
from mfumon.api.state.aggregate import GroupTotals, JobAccount, Summary
from mfumon.api.state.counters import DurableCounters
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import QUEUE_WAIT_BUCKETS, JobView, NodeView

Chunk = dict[str, str]  # family name -> its sample lines for one node or job
#: How long the renderer keeps the event loop per turn while nothing else waits for it: a few nodes (~0.1 ms each),
#: so a turn of the loop (a poll for I/O, ~10 us) is not paid for every node. While requests keep the loop busy (a
#: turn took longer than RENDER_IDLE_TURN_S to come back), it renders one node per turn: ingest first.
RENDER_TURN_S = 0.0005
RENDER_IDLE_TURN_S = 0.0002

try:
    _VERSION = version("mfu-monitor")
except PackageNotFoundError:  # running from a source tree without installing
    _VERSION = "unknown"


def render_node(node: NodeView, previous: GpuLines | None = None) -> tuple[dict[str, bytes], GpuLines]:
    """A node's and its GPUs' series (about 100 lines), and its GPUs' lines to render its next push from."""
    gpu_lines = render_gpu_lines(node, previous)
    lines: defaultdict[str, list[str]] = defaultdict(list)
    node_label = escape_label_value(node.name)
    lines["mfumon_node_info"].append(
        f'mfumon_node_info{{node="{node_label}",pool="{escape_label_value(node.pool or "")}"}} 1\n'
    )
    seen = f'mfumon_node_last_seen_timestamp_seconds{{node="{node_label}"}} {format_value(node.last_seen_at)}\n'
    lines["mfumon_node_last_seen_timestamp_seconds"].append(seen)

    def add(name: str, labels: str, value: float) -> None:
        lines[name].append(f"{name}{labels} {format_value(value)}\n")

    render_node_health(node, add)
    chunk = gpu_lines.chunk.copy()  # GPU and node families are apart: no family in both
    for name, chunk_lines in lines.items():
        chunk[name] = "".join(chunk_lines).encode()
    return chunk, gpu_lines


def render_job(job: JobView, baseline_mfu: float | None) -> Chunk:
    lines: dict[str, list[str]] = {}
    labels = labels_text([("job_id", job.job_id), ("kind", job.kind)])

    def add(name: str, value: float | None, label_text: str = labels) -> None:
        if value is not None:
            lines.setdefault(name, []).append(sample_line(name, label_text, value))

    latest = job.latest or ReportOutcome()
    info = [
        ("job_id", job.job_id),
        ("kind", job.kind),
        ("status", job.status),
        ("name", job.name or ""),
        ("team", job.team or ""),
        ("pool", job.pool or ""),
        ("model", job.model_key or ""),
        ("gpu_model", latest.device or job.gpu_model or ""),
        ("dtype", job.dtype),
    ]
    add("mfumon_job_info", 1, labels_text(info))
    if job.status == "running":
        add("mfumon_job_mfu_ratio", latest.mfu)
        add("mfumon_job_hfu_ratio", latest.hfu)
        add("mfumon_job_tokens_per_second", latest.tokens_per_second)
        if latest.mfu is not None:
            add("mfumon_job_model_flops_per_second", latest.model_flops_per_second)
            add("mfumon_job_peak_flops_per_second", latest.peak_flops_per_second)
        add("mfumon_job_comm_ratio", latest.comm_ratio)
        add("mfumon_job_data_wait_ratio", latest.data_wait_ratio)
        add("mfumon_job_step_seconds", latest.step_seconds)
        add("mfumon_job_baseline_mfu_ratio", baseline_mfu)
        add("mfumon_job_start_timestamp_seconds", job.started_at)
        add("mfumon_job_last_report_timestamp_seconds", job.last_report_at)
        _add_inference(add, job, latest)
    add("mfumon_job_restarts_total", job.restarts)
    add("mfumon_job_failures_total", job.failures)
    _add_waterfall(add, job)
    return {name: "".join(chunk) for name, chunk in lines.items()}


def _add_inference(add: Callable[..., None], job: JobView, latest: ReportOutcome) -> None:
    """An inference job's MBU, phases and engine state (absent for training jobs and unsplit reports)."""
    add("mfumon_job_requests_running", latest.requests_running)
    add("mfumon_job_requests_waiting", latest.requests_waiting)
    add("mfumon_job_kv_cache_usage_ratio", latest.kv_cache_usage)
    inference = latest.inference
    if inference is None:
        return
    ident = [("job_id", job.job_id), ("kind", job.kind)]
    add("mfumon_job_mbu_ratio", inference.mbu)
    for phase, values in sorted(inference.phases.items()):
        phase_labels = labels_text([*ident, ("phase", phase)])
        add("mfumon_job_phase_tokens_per_second", values.tokens_per_second, phase_labels)
        add("mfumon_job_phase_mfu_ratio", values.mfu, phase_labels)
        add("mfumon_job_phase_active_mfu_ratio", values.active_mfu, phase_labels)
    add("mfumon_job_memory_bytes_per_second", inference.memory_bytes_per_second)
    add("mfumon_job_peak_memory_bytes_per_second", inference.peak_memory_bytes_per_second)
    for part, value in (
        ("kv_cache", inference.decode_step_kv_cache_bytes),
        ("weights", inference.decode_step_weight_bytes),
    ):
        add("mfumon_job_decode_step_bytes", value, labels_text([*ident, ("part", part)]))
    add("mfumon_job_batch_size", inference.batch_size)
    add("mfumon_job_context_tokens", inference.context_tokens)


def render_job_gpus(job_id: str, job: JobView | None, account: JobAccount) -> Chunk:
    """A job's GPUs as the hardware sees them, and the cross-check; ``job=None`` for an id only exporters know."""
    lines: dict[str, list[str]] = {}
    labels = labels_text([("job_id", job_id), ("kind", job.kind if job is not None else "")])

    def add(name: str, value: float | None, label_text: str = labels) -> None:
        if value is not None:
            lines.setdefault(name, []).append(sample_line(name, label_text, value))

    if job is None:
        info = [("job_id", job_id), ("kind", ""), ("status", account.status), ("pool", account.pool or "")]
        add("mfumon_job_info", 1, labels_text(info))
    allocated = account.gpus_held
    add("mfumon_job_gpus_allocated", allocated)
    if job is not None:
        add("mfumon_job_gpus_requested", job.gpus_requested or job.num_gpus or allocated)
    if account.status == "running":
        add("mfumon_job_gpus_unverified", account.gpus_unverified)
    if account.gpus_unreported:  # present only while it holds some: Prometheus counts how long it is present
        add("mfumon_job_gpus_unreported", account.gpus_unreported)
    add("mfumon_job_hardware_mfu_ratio", account.hardware_mfu)
    add("mfumon_job_mfu_hardware_agreement_ratio", account.agreement)
    if account.status == "running":
        add("mfumon_job_gpu_tensor_active_spread_ratio", account.tensor_active_spread)
    return {name: "".join(chunk) for name, chunk in lines.items()}


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

    Series are rendered when their view changes, not when they are scraped, so a scrape joins cached bytes family
    by family and renders afresh only the per-job GPU accounts and the summary, which derive from the whole
    snapshot. A job's series are rendered when its view is taken (:meth:`prepare_job`). A node's are rendered by
    :meth:`keep_rendering`, a task on the event loop that renders the nodes marked changed (:meth:`node_changed`,
    called by the state for every view it takes, from a push or another replica): when the process has time, right
    after the push, a few per turn of the loop; when pushes keep it busy, one per turn, so fewer times than they
    arrive (a node pushed twice meanwhile is rendered once) and rendering never costs ingest its throughput.
    Whatever a scrape finds not rendered yet, or rendered from an older view, it renders itself: what it serves is
    always current.
    """

    def __init__(
        self,
        self_metrics: SelfMetrics,
        refresh_stats: Callable[[], tuple[float, int]],
        flush_stats: Callable[[], tuple[int, float, float, int]] = lambda: (0, 0.0, 0.0, 0),
        baseline_of: Callable[[str], float | None] = lambda signature: None,
    ) -> None:
        self._self_metrics = self_metrics
        self._refresh_stats = refresh_stats
        self._flush_stats = flush_stats  # queued nodes, age of the oldest, last flush seconds, flush errors
        self._baseline_of = baseline_of  # signature -> baseline MFU held now
        self._lock = threading.Lock()
        self._nodes: dict[str, _Cached] = {}
        self._jobs: dict[str, _Cached] = {}
        self._job_gpus: dict[str, _Cached] = {}
        self._changed: dict[str, None] = {}  # nodes to render, oldest change first
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
        """Mark a node for rendering; O(1), from any thread."""
        with self._lock:
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

    def waiting(self) -> int:
        """Nodes marked changed and not rendered yet."""
        with self._lock:
            return len(self._changed)

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
                    self.prepare_node(view)
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

    def render(self, snapshot: Snapshot, summary: Summary, shard: tuple[int, int] | None = None) -> bytes:
        """The exposition; with ``shard=(i, n)`` only the nodes and GPUs of shard ``i`` of ``n``, and the job,
        pool, team, cluster and self series on shard 0 only."""
        started = time.perf_counter()
        everything = shard is None or shard[0] == 0
        with self._lock:
            node_chunks = [self._node_chunk(node) for node in snapshot.nodes]
            self._forget(self._nodes, {n.name for n in snapshot.nodes})
            if shard is not None:
                index, count = shard
                node_chunks = [c for c in node_chunks if c.crc % count == index]
            job_chunks: list[_Cached] = []
            if everything:
                job_chunks = [self._job_chunk(job, snapshot) for job in snapshot.jobs]
                jobs = {j.job_id: j for j in snapshot.jobs}
                job_chunks += [self._job_gpus_chunk(i, jobs.get(i), account) for i, account in summary.jobs.items()]
                self._forget(self._jobs, set(jobs))
                self._forget(self._job_gpus, set(summary.jobs))
        parts: list[bytes] = []
        _join_families(parts, JOB_FAMILIES, [c.chunk for c in job_chunks])
        _join_families(parts, GPU_FAMILIES, [c.chunk for c in node_chunks])
        _join_families(parts, HEALTH_FAMILIES, [c.chunk for c in node_chunks])
        if everything:
            parts.append(self._render_summary(summary, len(snapshot.jobs)).encode())
            parts.append(render_health_summary(snapshot).encode())
            parts.append(_render_durable(snapshot.counters).encode())
            parts.append(render_capacity(snapshot, summary).encode())
        body = b"".join(parts)
        self._self_metrics.last_scrape_duration_seconds = time.perf_counter() - started
        return body

    def _node_chunk(self, node: NodeView) -> _Cached:
        cached = self._nodes.get(node.name)
        if cached is not None and cached.key == node.revision:
            return cached
        cached = self._render_node(node, cached)
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
        self._jobs[job.job_id] = cached
        self.renders["job"] += 1
        return cached

    def _job_gpus_chunk(self, job_id: str, job: JobView | None, account: JobAccount) -> _Cached:
        key = (job.updated_at if job is not None else None, account)
        cached = self._job_gpus.get(job_id)
        if cached is not None and cached.key == key:
            return cached
        cached = _Cached(key, _encoded(render_job_gpus(job_id, job, account)))
        self._job_gpus[job_id] = cached
        self.renders["job_gpus"] += 1
        return cached

    def _forget(self, cache: dict[str, _Cached], alive: set[str]) -> None:
        if len(cache) > len(alive):
            gone = [k for k in cache if k not in alive]
            for key in gone:
                del cache[key]
            self.forgotten += len(gone)

    def _render_summary(self, summary: Summary, jobs_visible: int) -> str:
        out: list[str] = []
        family = SUMMARY_FAMILIES

        def emit(name: str, rows: Iterable[tuple[list[tuple[str, str]], float | None]]) -> None:
            body = "".join(sample_line(name, labels_text(lbl), v) for lbl, v in rows if v is not None)
            out.append(family[name].header() + body)

        cluster = summary.cluster
        emit("mfumon_cluster_mfu_ratio", [([], cluster.mfu)])
        emit("mfumon_cluster_allocated_mfu_ratio", [([], cluster.allocated_mfu)])
        emit("mfumon_cluster_model_flops_per_second", [([], cluster.model_flops_per_second)])
        peak = cluster.peak_flops_per_second + cluster.idle_peak_flops_per_second
        emit("mfumon_cluster_peak_flops_per_second", [([], peak)])
        emit("mfumon_cluster_gpus", [([("state", s)], n) for s, n in cluster.states().items()])
        emit("mfumon_cluster_gpus_unknown_model", [([], summary.gpus_unknown_model)])
        emit("mfumon_cluster_gpus_unverified", [([], summary.gpus_unverified)])
        emit("mfumon_cluster_jobs_gpu_mismatch", [([], summary.jobs_gpu_mismatch)])
        emit("mfumon_cluster_reported_coverage_ratio", [([], cluster.reported_coverage)])
        emit("mfumon_cluster_nodes", [([], summary.nodes)])
        jobs = [
            ([("status", "running")], cluster.jobs_running),
            ([("status", "pending")], cluster.jobs_pending),
        ]
        emit("mfumon_cluster_jobs", jobs)
        pools = sorted(summary.pools.items())
        emit("mfumon_pool_mfu_ratio", _per("pool", pools, lambda g: g.mfu))
        emit("mfumon_pool_resource_satisfaction_ratio", _per("pool", pools, lambda g: g.resource_satisfaction))
        emit(
            "mfumon_pool_gpus",
            [([("pool", p), ("state", s)], n) for p, group in pools for s, n in group.states().items()],
        )
        emit("mfumon_pool_reported_coverage_ratio", _per("pool", pools, lambda g: g.reported_coverage))
        emit("mfumon_pool_gpus_allocated", _per("pool", pools, lambda g: g.gpus_allocated))
        emit("mfumon_pool_gpus_requested", _per("pool", pools, lambda g: g.gpus_requested))
        emit("mfumon_pool_jobs_pending", _per("pool", pools, lambda g: g.jobs_pending))
        teams = sorted(summary.teams.items())
        emit("mfumon_team_mfu_ratio", _per("team", teams, lambda g: g.allocated_mfu))
        emit("mfumon_team_gpus_allocated", _per("team", teams, lambda g: g.gpus_allocated))

        ingest, unknown, gpu_samples = self._self_metrics.copy()
        emit(
            "mfumon_ingest_requests_total",
            [([("endpoint", e), ("outcome", o)], n) for (e, o), n in sorted(ingest.items())],
        )
        emit("mfumon_ingest_gpu_samples_total", [([], gpu_samples)])
        emit(
            "mfumon_unknown_device_reports_total",
            [([("gpu_model", m)], n) for m, n in sorted(unknown.items())],
        )
        token_writes = sorted(self._self_metrics.copy_token_writes().items())
        emit(
            "mfumon_token_writes_total",
            [([("token_name", t), ("endpoint", e), ("outcome", o)], n) for (t, e, o), n in token_writes],
        )
        refused = sorted(self._self_metrics.copy_refused().items())
        emit("mfumon_ingest_refused_total", [([("limit", limit)], n) for limit, n in refused])
        rejected = sorted(self._self_metrics.copy_reads_rejected().items())
        emit("mfumon_read_requests_rejected_total", [([("group", g)], n) for g, n in rejected])
        open_connections, closed = self._self_metrics.connection_counts()
        if open_connections is not None:
            emit("mfumon_http_connections", [([], open_connections)])
        emit("mfumon_http_connections_closed_total", [([("reason", r)], n) for r, n in sorted(closed.items())])
        emit("mfumon_scrape_duration_seconds", [([], self._self_metrics.last_scrape_duration_seconds)])
        with self._lock:
            renders = sorted(self.renders.items())
        emit("mfumon_metrics_renders_total", [([("kind", kind)], n) for kind, n in renders])
        emit("mfumon_metrics_renders_pending", [([], self.waiting())])
        if (scrapes := self._self_metrics.scrapes) is not None:
            emit("mfumon_metrics_scrapes_total", [([("outcome", o)], n) for o, n in scrapes.counts().items()])
        refresh_seconds, refresh_errors = self._refresh_stats()
        emit("mfumon_state_refresh_duration_seconds", [([], refresh_seconds)])
        emit("mfumon_state_refresh_errors_total", [([], refresh_errors)])
        queued, age_seconds, flush_seconds, flush_errors = self._flush_stats()
        emit("mfumon_sample_queue_nodes", [([], queued)])
        emit("mfumon_sample_queue_age_seconds", [([], age_seconds)])
        emit("mfumon_sample_flush_duration_seconds", [([], flush_seconds)])
        emit("mfumon_sample_flush_errors_total", [([], flush_errors)])
        emit("mfumon_build_info", [([("version", _VERSION)], 1)])
        return "".join(out)


def _add_waterfall(add: Callable[..., None], job: JobView) -> None:
    """The job's waterfall counters (every category, zeros included) and lifetime ratios, once it has a ledger."""
    if not job.accounting:
        return
    ledger = Ledger.from_json(job.accounting)
    ident = [("job_id", job.job_id), ("kind", job.kind)]
    for category in CATEGORIES:
        labels = labels_text([*ident, ("category", category)])
        add("mfumon_job_gpu_seconds_total", ledger.gpu_seconds.get(category, 0.0), labels)
    add("mfumon_job_goodput_ratio", ledger.goodput)
    add("mfumon_job_lifetime_mfu_ratio", ledger.lifetime_mfu)
    add("mfumon_job_compute_mfu_ratio", ledger.compute_mfu)
    if job.status == "running":
        add("mfumon_job_step_time_deviation_ratio", ledger.step_time_deviation)


_CATEGORY_LABEL = re.compile(r'^\{(?P<scope>.*?),?category="(?P<category>[^"]*)"\}$')


def _render_durable(counters: DurableCounters) -> str:
    """Durable counters; a scope's GPU-seconds show every category (zeros too) once any of them is non-zero, so
    Prometheus sees each category's first increase."""
    out = []
    for name, family in DURABLE_FAMILIES.items():
        series = counters.series(name)
        categories = _WATERFALL_CATEGORIES.get(name)
        if categories is not None:
            values = dict(series)
            scopes = sorted({m.group("scope") for labels, _ in series if (m := _CATEGORY_LABEL.match(labels))})
            series = []
            for scope in scopes:
                prefix = scope + "," if scope else ""
                for category in categories:
                    labels = "{" + prefix + f'category="{category}"' + "}"
                    series.append((labels, values.get(labels, 0.0)))
        out.append(family.header() + "".join(sample_line(name, labels, v) for labels, v in series))
    return "".join(out)


_WATERFALL_CATEGORIES = {
    "mfumon_cluster_gpu_seconds_total": CLUSTER_CATEGORIES,
    "mfumon_pool_gpu_seconds_total": CLUSTER_CATEGORIES,
    "mfumon_team_gpu_seconds_total": CATEGORIES,
}


def _per(
    label: str, groups: list[tuple[str, GroupTotals]], value: Callable[[GroupTotals], float | None]
) -> list[tuple[list[tuple[str, str]], float | None]]:
    return [([(label, name)], value(group)) for name, group in groups]


def _join_families(parts: list[bytes], families: dict[str, Family], chunks: list[dict[str, bytes]]) -> None:
    for name, family in families.items():
        body = b"".join([chunk[name] for chunk in chunks if name in chunk])
        if body:
            parts.append(_header(family))
            parts.append(body)


def render_capacity(snapshot: Snapshot, summary: Summary) -> str:
    """Queue waits, quotas, fragmentation and scheduler sync series (few, except one wait per queued job)."""
    capacity = summary.capacity
    if capacity is None:
        return ""
    out: list[str] = []

    def emit(name: str, rows: Iterable[tuple[list[tuple[str, str]], float | None]]) -> None:
        body = "".join(sample_line(name, labels_text(lbl), v) for lbl, v in rows if v is not None)
        out.append(CAPACITY_FAMILIES[name].header() + body)

    kinds = {job.job_id: job.kind for job in snapshot.jobs}
    emit(
        "mfumon_job_queue_wait_seconds",
        [([("job_id", j), ("kind", kinds[j])], wait) for j, wait in sorted(capacity.queue_waits.items())],
    )
    out.append(_render_queue_wait_histograms(snapshot))
    pools = sorted(capacity.pools.items())
    emit("mfumon_pool_gpus_queued", [([("pool", p)], c.gpus_queued) for p, c in pools])
    emit("mfumon_pool_max_queue_wait_seconds", [([("pool", p)], c.max_queue_wait_seconds) for p, c in pools])
    with_nodes = [(p, c) for p, c in pools if c.free_per_node]
    emit("mfumon_pool_free_gpus", [([("pool", p)], c.free_gpus) for p, c in with_nodes])
    emit(
        "mfumon_pool_nodes_by_free_gpus",
        [([("pool", p), ("free", str(free))], n) for p, c in with_nodes for free, n in c.nodes_by_free().items()],
    )
    emit("mfumon_pool_largest_free_block_gpus", [([("pool", p)], c.largest_free_block) for p, c in with_nodes])
    emit("mfumon_pool_fragmented_gpus", [([("pool", p)], c.fragmented_gpus) for p, c in with_nodes])
    teams = sorted(capacity.teams.items())
    emit("mfumon_team_gpus_queued", [([("team", t)], q.gpus_queued) for t, q in teams])
    emit("mfumon_team_max_queue_wait_seconds", [([("team", t)], q.max_queue_wait_seconds) for t, q in teams])
    emit(
        "mfumon_team_resource_satisfaction_ratio",
        _per("team", sorted(summary.teams.items()), lambda g: g.resource_satisfaction),
    )
    quota_labels = [([("team", q.team), ("pool", q.pool or "")], q) for q in capacity.quotas]
    emit("mfumon_team_gpu_quota", [(lbl, q.gpus) for lbl, q in quota_labels])
    emit("mfumon_team_gpu_quota_used_ratio", [(lbl, q.used_ratio) for lbl, q in quota_labels])
    sources = sorted(snapshot.sources, key=lambda s: s.name)
    emit(
        "mfumon_scheduler_last_sync_timestamp_seconds",
        [([("source", s.name), ("kind", s.kind)], s.synced_at) for s in sources],
    )
    counts: dict[tuple[str, str], int] = {(s.name, status): 0 for s in sources for status in _SOURCE_STATUSES}
    for job in snapshot.jobs:
        if job.source is not None and job.status != "ended":
            status = "running" if job.status == "running" else "queued" if job.queued else "held"
            counts[(job.source, status)] = counts.get((job.source, status), 0) + 1
    emit("mfumon_scheduler_jobs", [([("source", s), ("status", st)], n) for (s, st), n in sorted(counts.items())])
    return "".join(out)


_SOURCE_STATUSES = ("running", "queued", "held")


def _render_queue_wait_histograms(snapshot: Snapshot) -> str:
    name = "mfumon_started_job_queue_wait_seconds"
    lines = [CAPACITY_FAMILIES[name].header()]
    bounds = [*(format_value(b) for b in QUEUE_WAIT_BUCKETS), "+Inf"]
    for histogram in sorted(snapshot.queue_waits, key=lambda h: (h.pool, h.team)):
        ident = [("pool", histogram.pool), ("team", histogram.team)]
        cumulative = 0
        for bound, count in zip(bounds, histogram.buckets, strict=True):
            cumulative += count
            lines.append(sample_line(f"{name}_bucket", labels_text([*ident, ("le", bound)]), cumulative))
        lines.append(sample_line(f"{name}_sum", labels_text(ident), histogram.sum_seconds))
        lines.append(sample_line(f"{name}_count", labels_text(ident), histogram.count))
    return "".join(lines)
