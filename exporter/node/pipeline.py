"""The collection loop: a collector thread that reads the source every interval and hands batches to the sender.

Collection and delivery are separate threads joined by the sender's queue, so a slow or unreachable aggregator never
delays or skips a collection. A failing cycle (the source raised) is logged and counted, and the loop goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from mfumon.exporter.node.push import Sender
from mfumon.exporter.node.selfmetrics import ExporterMetrics
from mfumon.exporter.node.sources import Source
from mfumon.exporter.samples import IbPortSample, NodeBatch, SoftwareEntry, count_up

__all__ = ["Agent", "PortReader", "node_software"]

logger = logging.getLogger(__name__)


class PortReader(Protocol):
    """Where a node's InfiniBand/RoCE ports come from (sysfs, or the simulation)."""

    name: str

    def collect(self) -> list[IbPortSample]: ...


def node_software(source: Source) -> tuple[SoftwareEntry, ...] | None:
    """The driver and firmware the source read (issue 59), for every batch; None from a source that reads none (the
    dcgm-exporter one), or when reading failed, which never costs the GPU samples."""
    read = getattr(source, "software", None)
    if read is None:
        return None
    try:
        return tuple(read()) or None
    except Exception as exc:  # best effort: the batch goes out without it
        logger.debug("reading the node's software from %s failed: %s", getattr(source, "name", source), exc)
        return None


class Agent:
    """Runs ``source.collect()`` every ``interval_s`` seconds and submits each batch to ``sender``."""

    def __init__(
        self,
        *,
        source: Source,
        sender: Sender,
        node: str,
        pool: str | None = None,
        interval_seconds: float = 10.0,
        metrics: ExporterMetrics | None = None,
        clock: Callable[[], float] = time.time,
        ports: PortReader | None = None,
    ) -> None:
        self.source = source
        self.ports = ports
        self.sender = sender
        self.node = node
        self.pool = pool
        self.interval_seconds = interval_seconds
        self.metrics = metrics or ExporterMetrics()
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._delay_seconds = 0.0
        self._started_at = time.monotonic()
        self._last_success: float | None = None
        self._source_errors_seen = 0
        self.gpu_model: str | None = None  # the node's most common GPU name, for the inference collector
        self.metrics.info.labels(node, source.name).set(1)

    def start(self, delay_seconds: float = 0.0) -> None:
        """Start the sender and the collector thread, whose first collection waits ``delay_seconds`` (many agents
        in one process, as in the demo, spread their pushes over the interval instead of sending them at once)."""
        self._delay_seconds = delay_seconds
        self._started_at = time.monotonic()
        self.sender.start()
        self._thread = threading.Thread(target=self._run, name="mfumon-collector", daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """Stop collecting, then let the sender deliver or spool what is queued."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_seconds)
        self.sender.stop(timeout_seconds=timeout_seconds)

    def collect_once(self) -> NodeBatch | None:
        """Run one cycle: collect, submit, record self-metrics. ``None`` when the source failed."""
        started = time.perf_counter()
        try:
            gpus = self.source.collect()
        except Exception as exc:  # a collector thread must survive any source failure
            self.metrics.collector_errors.inc()
            debug = logger.isEnabledFor(logging.DEBUG)
            logger.warning("collection from %s failed: %s", self.source.name, exc, exc_info=debug)
            return None
        finally:
            new_errors = self.source.error_count - self._source_errors_seen
            if new_errors > 0:
                self.metrics.collector_errors.inc(new_errors)
                self._source_errors_seen = self.source.error_count
        batch = NodeBatch(
            node=self.node,
            timestamp=self._clock(),
            gpus=tuple(gpus),
            pool=self.pool,
            ib_ports=self._ports(),
            software=node_software(self.source),
        )
        batch = self._extend(batch)
        self.sender.submit(batch)
        names = [gpu.name for gpu in gpus if gpu.up]
        if names:
            self.gpu_model = max(set(names), key=names.count)
        up, lost = count_up(gpus)
        self.metrics.gpus.labels("up").set(up)
        self.metrics.gpus.labels("lost").set(lost)
        self.metrics.collections.inc()
        self.metrics.collection_duration.observe(time.perf_counter() - started)
        self.metrics.last_collection.set(batch.timestamp)
        self._last_success = time.monotonic()
        return batch

    def _extend(self, batch: NodeBatch) -> NodeBatch:
        """What a subclass adds to the cycle's batch before it is pushed (NCCL Inspector's figures): nothing here."""
        return batch

    def _ports(self) -> tuple[IbPortSample, ...] | None:
        """This cycle's InfiniBand ports; a failure leaves them out of the batch, never the GPUs."""
        if self.ports is None:
            return None
        try:
            return tuple(self.ports.collect())
        except Exception as exc:  # a port reader must not cost the GPU samples
            self.metrics.collector_errors.inc()
            logger.warning("reading InfiniBand ports from %s failed: %s", self.ports.name, exc)
            return None

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Healthy while the last successful collection is recent (within 3 intervals, after a start-up grace)."""
        now = time.monotonic()
        limit_seconds = 3 * self.interval_seconds + 5.0
        reference = self._last_success if self._last_success is not None else self._started_at
        ok = now - reference <= limit_seconds
        return ok, {
            "node": self.node,
            "source": self.source.name,
            "seconds_since_collection": None if self._last_success is None else round(now - self._last_success, 3),
            "spool_batches": len(self.sender.spool),
            "last_push_success": self.sender.last_success,
        }

    def _run(self) -> None:
        if self._stop.wait(self._delay_seconds):
            return
        next_due = time.monotonic()
        while not self._stop.is_set():
            self.collect_once()
            next_due += self.interval_seconds
            now = time.monotonic()
            if next_due < now:  # a slow cycle: skip the missed slots rather than bursting
                next_due = now
            self._stop.wait(next_due - now)
