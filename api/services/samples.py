"""A node sample, end to end: a validated push goes into this process's state at once, and into the database
within a bound.

Node samples are gauges: only each node's newest state matters, and its exporter sends a fresh one every
interval. So a push is answered as soon as this process's state holds it, and one writer thread stores the newest
sample of every node that pushed since its last round, all in one transaction (group commit)::

    POST /v1/nodes/{node}/samples                     (event loop: no database on the request path)
      record_sample()  refuse if the writer is too far behind; build the node's view from the push; swap it
                       into the state (again if another thread got in between), which renders its /metrics
                       lines; queue the push's body, as received, for the writer
    SampleWriter thread, every SAMPLE_FLUSH_SECONDS
      flush()          one conditional upsert of every queued node (mfumon.api.crud.nodes), one commit; on
                       PostgreSQL a trigger tells the other replicas which nodes changed (mfumon.api.state.notify)

**Durability bound.** A push answered 2xx is in the database at most ``SAMPLE_FLUSH_SECONDS`` plus one flush
later. A crash (``kill -9``) loses only the pushes of that window: each such node shows its previous stored sample
until its exporter pushes again (a few seconds later). If the database is slow or down the queue ages; once the
oldest queued push is older than ``SAMPLE_MAX_UNFLUSHED_SECONDS``, pushes are refused (503 + Retry-After, the
exporter spools them) rather than acknowledged without a bound. A graceful stop flushes the queue.

**Order.** An older push never overwrites a newer one, whoever gets there first: the state keeps the view with
the newer sample, and the database's upsert keeps the newer row, across threads and replicas.

Job reports do not take this path: they are stored before they are answered (:mod:`mfumon.api.services.reports`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from mfumon.api.context import AppContext
from mfumon.api.crud.nodes import NodeWrite, upsert_nodes
from mfumon.api.errors import SamplesBacklogged
from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.api.state.software import pushed_software, software_json
from mfumon.api.state.views import build_node_view, collective_rank_views, collective_views, gpu_views, port_views

logger = logging.getLogger(__name__)


def record_sample(ctx: AppContext, node: str, sample: NodeSampleCreate, body: bytes) -> bool:
    """Apply one push to the state and queue it for the database; False when an older sample than the one held.

    ``body`` is the request body ``sample`` was validated from: it is what gets stored, as received, so storing
    costs no serialisation. An older sample (a spool replay after an outage) counts as received and keeps the
    node alive, but leaves its GPUs as they are.
    """
    writer = ctx.sample_writer
    lag = writer.lag_seconds()
    if lag > ctx.settings.SAMPLE_MAX_UNFLUSHED_SECONDS:
        raise SamplesBacklogged(lag)
    now = ctx.clock()
    # A sample dated ahead of its arrival (a fast clock, within the skew the schema allows) counts as arrived
    # now, so it never outranks the real samples taken after it.
    stamp = min(sample.timestamp, now)
    gpus = None
    while True:
        held = ctx.state.node(node)
        applied = held is None or stamp >= held.last_sample_timestamp
        kept = held.software if held is not None else None
        software = kept
        if held is None or applied:
            gpus = gpus or gpu_views(node, stamp, sample.gpus, ctx.resolver)
            software = pushed_software(sample.software, kept)  # ``kept`` itself when unchanged
            view = build_node_view(
                name=node,
                pool=sample.pool,
                last_seen_at=max(now, held.last_seen_at) if held else now,
                last_sample_timestamp=stamp,
                samples_received=(held.samples_received if held else 0) + 1,
                updated_at=now,
                gpus=gpus,
                ib_ports=port_views(sample.ib_ports),
                software=software,
                collectives=collective_views(sample.collectives),
                collective_ranks=collective_rank_views(sample.collective_ranks),
            )
        else:
            view = build_node_view(
                name=node,
                pool=held.pool,
                last_seen_at=max(now, held.last_seen_at),
                last_sample_timestamp=held.last_sample_timestamp,
                samples_received=held.samples_received + 1,
                updated_at=now,
                gpus=held.gpus,
                ib_ports=held.ib_ports,
                software=kept,
                collectives=held.collectives,
                collective_ranks=held.collective_ranks,
            )
        if ctx.state.apply_node(view, replaces=held):
            break
    try:
        stored = body.decode()
    except UnicodeDecodeError:  # JSON in UTF-16 or UTF-32: rare enough to pay for a serialisation
        stored = sample.model_dump_json(exclude_none=True)
    # The software is stored only when this push changed it (nearly never): else the stored list stays.
    writer.queue(node, sample.pool, stored, stamp, now, None if software is kept else software_json(software))
    ctx.self_metrics.count_gpu_samples(len(sample.gpus))
    return applied


@dataclass(slots=True)
class _Queued:
    """A node's newest sample not yet stored, and how many pushes it stands for."""

    pool: str | None
    sample: str  # the push's body
    sample_timestamp: float
    last_seen_at: float
    samples: int
    since: float  # monotonic time of the oldest push not yet stored
    software: list[dict[str, str]] | None = None  # the node's software, when a push changed it

    def absorb(self, other: _Queued) -> None:
        """Fold an entry for the same node that arrived later into this one (after a failed flush, this one is the
        batch that failed and ``other`` what was queued meanwhile)."""
        if other.sample_timestamp >= self.sample_timestamp:
            self.pool, self.sample, self.sample_timestamp = other.pool, other.sample, other.sample_timestamp
        if other.software is not None:  # the latest change wins; None (unchanged since) keeps this one's
            self.software = other.software
        self.last_seen_at = max(self.last_seen_at, other.last_seen_at)
        self.samples += other.samples
        self.since = min(self.since, other.since)


class SampleWriter:
    """Stores queued node samples in one transaction per round; see the module docstring for the bound.

    Args:
        sessions: the process's sessions (a round is one ``sessions.begin()`` transaction).
        interval_s: time between rounds (``SAMPLE_FLUSH_SECONDS``).
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        interval_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions  # its own on SQLite (mfumon.api.db.session.make_writer_engine)
        self._interval_seconds = interval_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._queued: dict[str, _Queued] = {}
        self._in_flight_since: float | None = None  # oldest push of the round being written
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_duration_seconds = 0.0
        self.errors = 0

    def queue(
        self,
        node: str,
        pool: str | None,
        sample: str,
        sample_timestamp: float,
        now: float,
        software: list[dict[str, str]] | None = None,
    ) -> None:
        entry = _Queued(pool, sample, sample_timestamp, now, 1, time.monotonic(), software)
        with self._lock:
            held = self._queued.get(node)
            if held is None:
                self._queued[node] = entry
            else:
                held.absorb(entry)

    def pending(self) -> int:
        with self._lock:
            return len(self._queued)

    def lag_seconds(self) -> float:
        """Age of the oldest push not yet stored (0 when everything is stored); O(1) per push."""
        with self._lock:
            # The queue is in order of each node's first push since the last round, so its first entry is oldest.
            first = next(iter(self._queued.values()), None)
            oldest = self._in_flight_since if self._in_flight_since is not None else first.since if first else None
        return 0.0 if oldest is None else time.monotonic() - oldest

    def flush(self) -> int:
        """Store everything queued now, in one transaction; returns the number of nodes written."""
        with self._flush_lock:
            with self._lock:
                batch, self._queued = self._queued, {}
                self._in_flight_since = min((q.since for q in batch.values()), default=None)
            if not batch:
                return 0
            started = time.perf_counter()
            try:
                writes = [
                    NodeWrite(name, q.pool, q.sample, q.sample_timestamp, q.last_seen_at, q.samples, q.software)
                    for name, q in batch.items()
                ]
                with self.sessions.begin() as session:
                    upsert_nodes(session=session, writes=writes, now=self._clock())
            except Exception:
                self.errors += 1
                with self._lock:  # back at the head of the queue (they are older), for the next round
                    for name, later in self._queued.items():
                        if name in batch:
                            batch[name].absorb(later)
                    self._queued = {**batch, **{k: v for k, v in self._queued.items() if k not in batch}}
                raise
            finally:
                with self._lock:
                    self._in_flight_since = None
            self.last_duration_seconds = time.perf_counter() - started
        return len(writes)

    # -- the thread ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mfumon-sample-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and store what is queued (a graceful shutdown loses nothing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        try:
            self.flush()
        except Exception:
            logger.exception("final flush of %d node sample(s) failed", self.pending())

    def _run(self) -> None:
        while not self._stop.wait(self._interval_seconds):
            try:
                self.flush()
            except Exception:
                logger.exception("storing node samples failed; %d node(s) stay queued and are retried", self.pending())
