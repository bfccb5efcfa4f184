"""Database rows -> in-memory views, and the poll that brings other replicas' writes into this process.

The poll reads rows whose ``updated_at`` is newer than the last one seen minus an overlap (writers' clocks and
commit order may differ by a little); rows whose revision this process already holds are skipped, so an
unchanged node is neither re-read in full nor re-rendered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from api.crud.counters import read_counters
from api.crud.events import prune_events
from api.crud.jobs import prune_history
from api.db.models import Baseline, Gpu, Job, Node, QueueWaitHistogram, SchedulerSource
from api.state.devices import DeviceResolver
from api.state.store import ClusterState
from api.state.views import (
    BaselineView,
    GpuView,
    HistogramView,
    JobView,
    NodeView,
    SourceView,
    build_node_view,
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


def gpu_view(row: Gpu, resolver: DeviceResolver) -> GpuView:
    device, peak = resolver.resolve(row.name, row.mig_profile)
    return GpuView(
        uuid=row.uuid,
        node=row.node,
        index=row.index,
        name=row.name,
        mig_profile=row.mig_profile,
        job_id=row.job_id,
        up=row.up,
        counters=dict(row.counters or {}),
        sample_timestamp=row.sample_timestamp,
        device=device,
        bf16_peak_flops=peak,
    )


def node_view(row: Node, gpus: Sequence[GpuView]) -> NodeView:
    return build_node_view(
        name=row.name,
        pool=row.pool,
        last_seen_at=row.last_seen_at,
        last_sample_timestamp=row.last_sample_timestamp,
        samples_received=row.samples_received,
        updated_at=row.updated_at,
        gpus=tuple(sorted(gpus, key=lambda g: (g.index, g.uuid))),
        ib_ports=None if row.ib_ports is None else tuple(row.ib_ports),
    )


def job_view(row: Job) -> JobView:
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
        latest=dict(row.latest) if row.latest else None,
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
    )


def source_view(row: SchedulerSource) -> SourceView:
    quotas = tuple((str(q["team"]), q.get("pool"), int(q["gpus"])) for q in row.quotas or ())
    return SourceView(
        name=row.name,
        kind=row.kind,
        observed_at=row.observed_at,
        synced_at=row.synced_at,
        quotas=quotas,
        updated_at=row.updated_at,
    )


def histogram_view(row: QueueWaitHistogram) -> HistogramView:
    return HistogramView(
        pool=row.pool,
        team=row.team,
        buckets=tuple(int(c) for c in row.buckets),
        sum_seconds=row.sum_seconds,
        count=row.count,
        updated_at=row.updated_at,
    )


def apply_baseline_row(state: ClusterState, row: Baseline) -> None:
    """Hold a baseline row as it now is: its value, or none once it was reset (``mfu`` null)."""
    view = None
    if row.mfu is not None:
        view = BaselineView(signature=row.signature, mfu=row.mfu, updated_at=row.updated_at, pinned=row.pinned)
    state.apply_baseline(row.signature, row.version, view)


class Refresher:
    """Polls the database for rows changed by any replica and applies them to the state."""

    def __init__(
        self,
        state: ClusterState,
        sessions: sessionmaker[Session],
        resolver: DeviceResolver,
        *,
        overlap_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._sessions = sessions
        self._resolver = resolver
        self._overlap_s = overlap_s
        self._clock = clock
        self._watermark = 0.0
        self._counters_watermark: float | None = None  # durable counters: the first poll reads them all
        self.last_duration_s = 0.0
        self.errors = 0

    def refresh(self) -> int:
        """One poll; returns how many rows were applied. The first poll loads what could still be visible."""
        started = time.perf_counter()
        now = self._clock()
        state = self._state
        horizon = max(state.node_ttl_s, state.job_ttl_s, state.pending_job_ttl_s)
        since = max(self._watermark - self._overlap_s, now - horizon)
        applied = 0
        newest = self._watermark
        with self._sessions() as session:
            nodes = session.scalars(select(Node).where(Node.updated_at > since)).all()
            changed = [n for n in nodes if state.node_revision(n.name) != (n.updated_at, n.last_seen_at)]
            if changed:
                gpus_by_node: dict[str, list[GpuView]] = {n.name: [] for n in changed}
                for chunk in _chunks([n.name for n in changed], 500):
                    for gpu in session.scalars(select(Gpu).where(Gpu.node.in_(chunk))):
                        gpus_by_node[gpu.node].append(gpu_view(gpu, self._resolver))
                for row in changed:
                    state.apply_node(node_view(row, gpus_by_node[row.name]))
                applied += len(changed)
            newest = max([newest, *(n.updated_at for n in nodes)])
            for job in session.scalars(select(Job).where(Job.updated_at > since)):
                newest = max(newest, job.updated_at)
                if state.job_revision(job.job_id) != job.updated_at:
                    state.apply_job(job_view(job))
                    applied += 1
            # Baselines are one row per workload; the first poll reads them all (most were set long ago).
            baseline_since = since if self._watermark else -1.0
            for baseline in session.scalars(select(Baseline).where(Baseline.updated_at > baseline_since)):
                newest = max(newest, baseline.updated_at)
                apply_baseline_row(state, baseline)
            counters_since = -1.0 if self._counters_watermark is None else self._counters_watermark - self._overlap_s
            state.counters.apply(read_counters(session, changed_after=counters_since))
            self._counters_watermark = now
            # Sources and histograms are few rows; the first poll reads them all (a source may be quiet for long).
            source_since = since if self._watermark else 0.0
            for source in session.scalars(select(SchedulerSource).where(SchedulerSource.updated_at > source_since)):
                newest = max(newest, source.updated_at)
                if state.source_revision(source.name) != source.updated_at:
                    state.apply_source(source_view(source))
                    applied += 1
            histograms = select(QueueWaitHistogram).where(QueueWaitHistogram.updated_at > source_since)
            for histogram in session.scalars(histograms):
                newest = max(newest, histogram.updated_at)
                state.apply_queue_wait(histogram_view(histogram))
        self._watermark = max(newest, since)
        state.prune(now)
        self.last_duration_s = time.perf_counter() - started
        return applied

    def prune_history(self, retention_s: float) -> int:
        """Delete job reports and events older than the retention; any replica may do it, the result is the same."""
        with self._sessions.begin() as session:
            older_than = self._clock() - retention_s
            return prune_history(session=session, older_than=older_than) + prune_events(
                session=session, older_than=older_than
            )


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class RefreshThread(threading.Thread):
    """Runs :meth:`Refresher.refresh` every interval, prunes old report history hourly, and runs ``periodic``
    tasks (``(every_s, task)``, e.g. ending jobs silent past their TTL) at their own pace.

    A failed poll or task is logged and retried, never fatal: the replica keeps serving what it has.
    """

    PRUNE_EVERY_S = 3600.0

    def __init__(
        self,
        refresher: Refresher,
        interval_s: float,
        history_retention_s: float,
        periodic: Sequence[tuple[float, Callable[[], object]]] = (),
    ) -> None:
        super().__init__(name="mfumon-refresh", daemon=True)
        self._refresher = refresher
        self._interval_s = interval_s
        self._retention_s = history_retention_s
        self._stop_event = threading.Event()
        self._next_prune = 0.0
        self._periodic = list(periodic)
        self._due = [0.0] * len(self._periodic)  # monotonic time each periodic task runs next

    def run(self) -> None:
        while not self._stop_event.wait(self._interval_s):
            try:
                self._refresher.refresh()
                if time.monotonic() >= self._next_prune:
                    self._next_prune = time.monotonic() + self.PRUNE_EVERY_S
                    self._refresher.prune_history(self._retention_s)
            except Exception:
                self._refresher.errors += 1
                logger.exception("state refresh from the database failed; retrying")
            for i, (every_s, task) in enumerate(self._periodic):
                if time.monotonic() < self._due[i]:
                    continue
                self._due[i] = time.monotonic() + every_s
                try:
                    task()
                except Exception:
                    self._refresher.errors += 1
                    logger.exception("periodic task %s failed; retrying", getattr(task, "__name__", task))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
