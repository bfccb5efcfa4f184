"""Delivery of node batches to the aggregator: a sender thread, retries with backoff, and the spool.

The collector thread only calls :meth:`Sender.submit` (a non-blocking queue put), so collection never waits on the
network. The sender thread pushes batches in order. When a push fails (connection error, timeout, 5xx, 401/403,
408, 429) the batch goes to the spool, every later batch follows it there (so order is kept), and the spool is
replayed oldest-first after an exponential backoff with jitter, or after the aggregator's ``Retry-After`` (an
overloaded aggregator answers 503 with one) if that is longer. A batch the aggregator rejects as invalid (other
4xx) is dropped and counted, since sending it again cannot succeed.

A push that failed on a kept-alive connection the aggregator was closing is sent again at once on a fresh one
(:mod:`mfumon.exporter.transport`), so the keep-alive race never shows. A 401/403 is logged once, with the flag and
variables that fix it, then retried with backoff quietly and counted (``mfumon_exporter_auth_failures_total``).
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from mfumon.exporter.auth import AUTH_STATUSES, auth_hint
from mfumon.exporter.node.selfmetrics import ExporterMetrics
from mfumon.exporter.node.spool import Spool
from mfumon.exporter.retry_after import retry_after_seconds, spread
from mfumon.exporter.samples import NodeBatch, decode_record
from mfumon.exporter.transport import FreshConnectionRetry

__all__ = ["RetryPolicy", "Sender"]

logger = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({401, 403, 404, 408, 425, 429})
_STOP = object()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with "equal jitter": the n-th delay is uniform in [d/2, d], d = min(cap, base x 2^n)."""

    initial_seconds: float = 0.5
    max_seconds: float = 30.0
    multiplier: float = 2.0

    def delay(self, failures: int, rng: random.Random) -> float:
        """Seconds to wait after ``failures`` consecutive failed pushes (``failures`` >= 1)."""
        ceiling = min(self.max_seconds, self.initial_seconds * self.multiplier ** max(0, failures - 1))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


class Sender:
    """Pushes batches from a queue to ``POST {url}/v1/nodes/{node}/samples`` in a background thread.

    Args:
        url: the aggregator's base URL.
        spool: where undelivered batches wait (disk or memory, bounded).
        token: bearer token for ingest, or ``None``.
        timeout_s: per-request timeout (connect is capped at 2 s so an unreachable host fails fast).
    """

    def __init__(
        self,
        url: str,
        spool: Spool,
        *,
        token: str | None = None,
        metrics: ExporterMetrics | None = None,
        timeout_seconds: float = 5.0,
        retry: RetryPolicy | None = None,
        queue_max: int = 1000,
        seed: int | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"User-Agent": "mfumon-exporter"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        timeout = httpx.Timeout(timeout_seconds, connect=min(2.0, timeout_seconds))
        self._client = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=FreshConnectionRetry(transport)
        )
        self._spool = spool
        self._metrics = metrics or ExporterMetrics()
        self._retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_max)
        self._failures = 0
        self._auth_told = False  # the 401/403 hint is logged once per process
        self._next_attempt = 0.0
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self.last_success: float | None = None
        self._metrics.spool_batches.set_function(lambda: len(self._spool))
        self._metrics.spool_bytes.set_function(lambda: self._spool.size_bytes)

    @property
    def spool(self) -> Spool:
        return self._spool

    def submit(self, batch: NodeBatch) -> None:
        """Queue a batch for delivery; never blocks (a full queue drops the batch and counts it)."""
        try:
            self._queue.put_nowait(batch.encode())
        except queue.Full:
            self._metrics.queue_dropped.inc()
            logger.warning("delivery queue full (%d batches); dropping a batch", self._queue.maxsize)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mfumon-sender", daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """Deliver or spool what is queued, then stop the thread and close the HTTP client."""
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout=timeout_seconds)
        self._client.close()
        if len(self._spool):
            logger.warning("stopping with %d undelivered batch(es) in the spool", len(self._spool))

    # -- the sender thread ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            wait = max(0.0, self._next_attempt - time.monotonic()) if len(self._spool) else 1.0
            try:
                item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                item = None
            if item is _STOP:
                self._finish()
                return
            # A new batch goes out directly only when nothing older waits; otherwise it queues behind the spool.
            direct_ok = isinstance(item, bytes) and not len(self._spool) and time.monotonic() >= self._next_attempt
            if isinstance(item, bytes) and (not direct_ok or self._push(item) == "error"):
                self._to_spool(item)
            if len(self._spool) and time.monotonic() >= self._next_attempt:
                self._replay()

    def _replay(self) -> None:
        """Push spooled batches oldest-first until one fails (then back off) or the spool is empty."""
        while True:
            if self._absorb_queue():
                return  # stop requested: _run sees the sentinel next and finishes
            head = self._spool.peek()
            if head is None:
                return
            key, data = head
            if self._push(data) == "error":
                return
            self._spool.remove(key)

    def _absorb_queue(self) -> bool:
        """Move queued batches behind the spooled ones (they are newer, so order is kept). True on stop."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return False
            if item is _STOP:
                self._queue.put(_STOP)  # seen again by _run
                return True
            assert isinstance(item, bytes)
            self._to_spool(item)

    def _finish(self) -> None:
        """On stop: one last attempt for what is pending, the rest stays in the spool."""
        self._absorb_queue()
        if len(self._spool) and self._failures == 0:
            self._replay()

    def _to_spool(self, data: bytes) -> None:
        dropped = self._spool.put(data)
        if dropped:
            self._metrics.spool_dropped.inc(dropped)

    def _push(self, data: bytes) -> str:
        """One POST; returns the outcome and updates the backoff state."""
        node, body = decode_record(data)
        started = time.perf_counter()
        outcome = "error"
        try:
            response = self._client.post(f"/v1/nodes/{quote(node, safe='')}/samples", json=body)
        except httpx.HTTPError as exc:
            logger.log(logging.WARNING if self._failures == 0 else logging.DEBUG, "push failed: %s", exc)
            retry_after = None
        else:
            retry_after = response.headers.get("Retry-After")
            if response.is_success:
                outcome = "success"
            elif response.status_code in AUTH_STATUSES:
                self._metrics.auth_failures.labels(str(response.status_code)).inc()
                level = logging.DEBUG if self._auth_told else logging.WARNING
                logger.log(level, "push refused: %s", auth_hint(response.status_code, response.text))
                self._auth_told = True
            elif response.status_code < 500 and response.status_code not in _RETRY_STATUS:
                outcome = "rejected"
                logger.warning("aggregator rejected a batch (%d): %s", response.status_code, response.text[:300])
            elif self._failures == 0:
                logger.warning("push failed with HTTP %d; will retry", response.status_code)
        self._metrics.push_duration.observe(time.perf_counter() - started)
        self._metrics.push.labels(outcome).inc()
        if outcome == "error":
            self._failures += 1
            delay = self._retry.delay(self._failures, self._rng)
            wait = retry_after_seconds(retry_after)
            if wait is not None:  # the aggregator said how long to stay away: never sooner, and not in lockstep
                delay = max(delay, spread(min(wait, self._retry.max_seconds), self._rng))
            self._next_attempt = time.monotonic() + delay
            return outcome
        if self._failures:
            logger.info("aggregator reachable again after %d failed attempt(s)", self._failures)
        self._failures = 0
        self._auth_told = False  # the 401/403 hint is logged once per process
        self._next_attempt = 0.0
        if outcome == "success":
            self.delivered += 1
            self.last_success = time.time()
            self._metrics.last_push_success.set(self.last_success)
        return outcome
