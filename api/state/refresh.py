"""Database rows -> in-memory views: the full load at start, and the rows other replicas changed since.

A replica learns what others wrote from PostgreSQL notifications (:mod:`mfumon.api.state.notify`): each names the
nodes, jobs or baselines a transaction changed, and :class:`Refresher` reads exactly those rows. After a lost connection
the listener catches up with :meth:`Refresher.load` from the last change seen, minus an overlap for writers'
clocks. Views are applied only when newer than the one held, so reading a row twice or late is harmless.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from mfumon.api.crud.counters import read_counters
from mfumon.api.crud.events import prune_events
from mfumon.api.crud.jobs import prune_history
from mfumon.api.crud.nodes import decode_sample, read_nodes
from mfumon.api.db.tables import BaselineRow, JobRow, NodeRow, QueueWaitHistogramRow, SchedulerSourceRow
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.profiles import ProfileFigures
from mfumon.api.state.software import pushed_software, stored_software
from mfumon.api.state.store import ClusterState
from mfumon.api.state.views import (
    BaselineView,
    HistogramView,
    JobView,
    NodeView,
    SourceView,
    build_node_view,
    collective_rank_views,
    collective_views,
    gpu_views,
    port_views,
)

logger = logging.getLogger(__name__)


def model_key(model: dict[str, object] | None) -> str | None:
    """The model part of a workload signature: its name, else its shape."""
    if not model:
        return None
    if model.get("name"):
        return str(model["name"])
    parts = ("params", "active_params", "layers", "heads", "head_dim", "seq_len", "flops_per_token")
    return ",".join(f"{p}={model[p]:g}" for p in parts if model.get(p) is not None)


def node_view(row: NodeRow, resolver: DeviceResolver) -> NodeView:
    sample = decode_sample(row.sample)
    # The stored list (the last one the node sent, kept by pushes without one), else the sample's own.
    software = stored_software(row.software) if row.software is not None else pushed_software(sample.software, None)
    return build_node_view(
        name=row.name,
        pool=row.pool,
        last_seen_at=row.last_seen_at,
        last_sample_timestamp=row.last_sample_timestamp,
        samples_received=row.samples_received,
        updated_at=row.updated_at,
        gpus=gpu_views(row.name, row.last_sample_timestamp, sample.gpus, resolver),
        ib_ports=port_views(sample.ib_ports),
        software=software,
        collectives=collective_views(sample.collectives),
        collective_ranks=collective_rank_views(sample.collective_ranks),
    )


def job_view(row: JobRow) -> JobView:
    return JobView(
        job_id=row.job_id,
        status=row.status,
        kind=row.kind,
        name=row.name,
        team=row.team,
        pool=row.pool,
        gpu_model=row.gpu_model,
        dtype=row.dtype,
        num_gpus=row.num_gpus,
        gpus_requested=row.gpus_requested,
        model_key=model_key(row.model),
        created_at=row.created_at,
        started_at=row.started_at,
        last_report_at=row.last_report_at,
        ended_at=row.ended_at,
        latest=ReportOutcome.from_json(row.latest),
        updated_at=row.updated_at,
        restarts=row.restarts or 0,
        failures=row.failures or 0,
        accounting=dict(row.accounting) if row.accounting else None,
        source=row.source,
        submitted_at=row.submitted_at,
        queued_at=row.queued_at,
        pending_reason=row.pending_reason,
        scheduler_restarts=row.scheduler_restarts,
        gpus_scheduled=row.gpus_scheduled,
        placement=dict(row.placement) if row.placement else None,
        request_units=tuple((int(g), int(n)) for g, n in row.request_units) if row.request_units else None,
        profile=ProfileFigures.from_json(row.profile),
    )


def source_view(row: SchedulerSourceRow) -> SourceView:
    quotas = tuple((str(q["team"]), q.get("pool"), int(q["gpus"])) for q in row.quotas or ())
    return SourceView(
        name=row.name,
        kind=row.kind,
        observed_at=row.observed_at,
        synced_at=row.synced_at,
        quotas=quotas,
        updated_at=row.updated_at,
        pools=None
        if row.pools is None
        else tuple((str(p["name"]), frozenset(str(n) for n in p["nodes"])) for p in row.pools),
    )


def histogram_view(row: QueueWaitHistogramRow) -> HistogramView:
    return HistogramView(
        pool=row.pool,
        team=row.team,
        buckets=tuple(int(c) for c in row.buckets),
        sum_seconds=row.sum_seconds,
        count=row.count,
        updated_at=row.updated_at,
    )


def apply_baseline_row(state: ClusterState, row: BaselineRow) -> None:
    """Hold a baseline row as it now is: its value, or none once it was reset (``mfu`` null)."""
    view = None
    if row.mfu is not None:
        view = BaselineView(signature=row.signature, mfu=row.mfu, updated_at=row.updated_at, pinned=row.pinned)
    state.apply_baseline(row.signature, row.version, view)


class Refresher:
    """Reads rows into the state: everything recent, or exactly the rows a notification names."""

    def __init__(
        self,
        state: ClusterState,
        sessions: sessionmaker[Session],
        resolver: DeviceResolver,
        *,
        overlap_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._sessions = sessions
        self._resolver = resolver
        self._overlap_seconds = overlap_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self.watermark = 0.0  # newest updated_at read so far
        self._counters_read_at: float | None = None  # durable counters: the first read takes them all
        self._queue_waits_read_at: float | None = None  # and so do queue-wait histograms
        self.last_duration_seconds = 0.0
        self.errors = 0

    def load(self) -> int:
        """Every row changed since the watermark (minus the overlap), or that can still be visible; at start
        and after the listener lost its connection. Returns the number of views applied."""
        state = self._state
        horizon = max(state.node_ttl_seconds, state.job_ttl_seconds, state.pending_job_ttl_seconds)
        since = max(self.watermark - self._overlap_seconds, self._clock() - horizon)
        with self._sessions() as session:
            applied = self._apply(
                read_nodes(session=session, since=since),
                session.scalars(select(JobRow).where(JobRow.updated_at > since)).all(),
                # Baselines are one row per workload, most set long ago: the first load reads them all.
                session.scalars(
                    select(BaselineRow).where(BaselineRow.updated_at > (since if self.watermark else -1.0))
                ).all(),
                # Scheduler sources are few rows, and one may be quiet for long: read them all.
                session.scalars(select(SchedulerSourceRow)).all(),
            )
            self._read_counters(session)
            self._read_queue_waits(session)
            return applied

    def load_changed(self, changed: Mapping[str, Collection[str]]) -> int:
        """The rows notifications named, by table (every table of ``mfumon.api.state.notify.MIRRORED`` has a line
        here)."""
        return self.load_rows(
            nodes=sorted(changed.get("nodes", ())),
            jobs=sorted(changed.get("jobs", ())),
            baselines=sorted(changed.get("baselines", ())),
            sources=sorted(changed.get("scheduler_sources", ())),
            counters=bool(changed.get("counters")),
            queue_waits=bool(changed.get("queue_wait_histograms")),
        )

    def load_rows(
        self,
        nodes: Sequence[str] = (),
        jobs: Sequence[str] = (),
        baselines: Sequence[str] = (),
        sources: Sequence[str] = (),
        counters: bool = False,
        queue_waits: bool = False,
    ) -> int:
        """Exactly the named rows, and the durable counters or queue-wait histograms changed lately (what
        notifications say changed)."""
        node_rows: list[NodeRow] = []
        job_rows: Sequence[JobRow] = []
        baseline_rows: Sequence[BaselineRow] = []
        source_rows: Sequence[SchedulerSourceRow] = []
        with self._sessions() as session:
            for chunk in _chunks(list(nodes), 1000):
                node_rows += read_nodes(session=session, names=chunk)
            if jobs:
                job_rows = session.scalars(select(JobRow).where(JobRow.job_id.in_(list(jobs)))).all()
            if baselines:
                baseline_rows = session.scalars(
                    select(BaselineRow).where(BaselineRow.signature.in_(list(baselines)))
                ).all()
            if sources:
                query = select(SchedulerSourceRow).where(SchedulerSourceRow.name.in_(list(sources)))
                source_rows = session.scalars(query).all()
            if counters:
                self._read_counters(session)
            if queue_waits:
                self._read_queue_waits(session)
            return self._apply(node_rows, job_rows, baseline_rows, source_rows)

    def _read_counters(self, session: Session) -> None:
        now = self._clock()
        since = -1.0 if self._counters_read_at is None else self._counters_read_at - self._overlap_seconds
        self._state.counters.apply(read_counters(session, changed_after=since))
        self._counters_read_at = now

    def _read_queue_waits(self, session: Session) -> None:
        now = self._clock()
        since = -1.0 if self._queue_waits_read_at is None else self._queue_waits_read_at - self._overlap_seconds
        for histogram in session.scalars(select(QueueWaitHistogramRow).where(QueueWaitHistogramRow.updated_at > since)):
            self._state.apply_queue_wait(histogram_view(histogram))
        self._queue_waits_read_at = now

    def _apply(
        self,
        nodes: Sequence[NodeRow],
        jobs: Sequence[JobRow],
        baselines: Sequence[BaselineRow],
        sources: Sequence[SchedulerSourceRow] = (),
    ) -> int:
        started = time.perf_counter()
        state = self._state
        applied = 0
        newest = self.watermark
        for node in nodes:
            newest = max(newest, node.updated_at)
            held = state.node(node.name)
            if held is None or (node.last_sample_timestamp, node.last_seen_at) > held.revision:
                try:
                    view = node_view(node, self._resolver)
                except ValidationError as exc:
                    # A row stored under an older, laxer schema ("up": 1, a number as a string): the node is left
                    # out until its next push replaces the row, rather than stopping every replica's state load.
                    logger.warning(
                        "node %s: stored sample no longer validates, skipped until its next push: %s",
                        node.name,
                        exc.errors(include_url=False)[:3],
                    )
                    continue
                applied += state.apply_node(view)
        for job in jobs:
            newest = max(newest, job.updated_at)
            if state.job_revision(job.job_id) != job.updated_at:
                state.apply_job(job_view(job))
                applied += 1
        for baseline in baselines:
            newest = max(newest, baseline.updated_at)
            apply_baseline_row(state, baseline)
        for source in sources:
            if state.source_revision(source.name) != source.updated_at:
                state.apply_source(source_view(source))
                applied += 1
        with self._lock:
            self.watermark = max(self.watermark, newest)
        self.last_duration_seconds = time.perf_counter() - started
        return applied

    def prune_history(self, retention_seconds: float) -> int:
        """Delete job reports and events older than the retention; any replica may do it, the result is the same."""
        with self._sessions.begin() as session:
            older_than = self._clock() - retention_seconds
            return prune_history(session=session, older_than=older_than) + prune_events(
                session=session, older_than=older_than
            )


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class MaintenanceThread(threading.Thread):
    """Forgets expired nodes and ended jobs every interval, prunes old report history hourly, and runs ``periodic``
    tasks (``(every_s, task)``, e.g. ending jobs silent past their TTL) at their own pace.

    A failed round or task is logged and retried, never fatal.
    """

    PRUNE_EVERY_S = 3600.0

    def __init__(
        self,
        state: ClusterState,
        refresher: Refresher,
        interval_seconds: float,
        history_retention_seconds: float,
        periodic: Sequence[tuple[float, Callable[[], object]]] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name="mfumon-maintenance", daemon=True)
        self._state = state
        self._refresher = refresher
        self._interval_seconds = interval_seconds
        self._retention_seconds = history_retention_seconds
        self._clock = clock
        self._stop_event = threading.Event()
        self._next_prune = 0.0
        self._periodic = list(periodic)
        self._due = [0.0] * len(self._periodic)  # monotonic time each periodic task runs next

    def run(self) -> None:
        while not self._stop_event.wait(self._interval_seconds):
            try:
                self._state.prune(self._clock())
                if time.monotonic() >= self._next_prune:
                    self._next_prune = time.monotonic() + self.PRUNE_EVERY_S
                    self._refresher.prune_history(self._retention_seconds)
            except Exception:
                self._refresher.errors += 1
                logger.exception("state maintenance failed; retrying")
            for k, (every_seconds, task) in enumerate(self._periodic):
                if time.monotonic() < self._due[k]:
                    continue
                self._due[k] = time.monotonic() + every_seconds
                try:
                    task()
                except Exception:
                    self._refresher.errors += 1
                    logger.exception("periodic task %s failed; retrying", getattr(task, "__name__", task))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
