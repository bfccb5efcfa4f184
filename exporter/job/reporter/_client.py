"""Delivery of reporter requests to the aggregator: stdlib HTTP, a bounded retry queue, counted drops.

The standard library's ``urllib`` is used rather than httpx so that the reporter adds no import time and no
dependency to a training process. Nothing here raises to the caller: a request is either delivered, kept for
the next round (network error, 5xx, 429; not before the aggregator's ``Retry-After`` when it sends one), dropped
when the queue is full, or rejected (other 4xx, which retrying would not fix). The outcome of each round is
logged at most once. A 401/403 is logged once, naming the flag and variables that fix it; the requests stay queued and
are tried again after a growing backoff, quietly, counted in ``DeliveryStats.auth_failures``.

``urllib`` opens a connection per request, so the reporter never meets the keep-alive race the exporter guards
against (:mod:`mfumon.exporter.transport`).
"""

from __future__ import annotations

import collections
import json
import logging
import random
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from time import monotonic, sleep
from typing import Any
from urllib.parse import urlsplit

from mfumon.exporter.auth import AUTH_STATUSES, auth_hint
from mfumon.exporter.retry_after import retry_after_seconds, spread

logger = logging.getLogger("mfumon.exporter.job.reporter")

_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
_TOKEN_FIX = (
    "mfumon wrap --token-file FILE, JobReporter(token_file=...), or the environment variable MFUMON_TOKEN_FILE=FILE "
    "or MFUMON_TOKEN=TOKEN"
)
_AUTH_BACKOFF_SECONDS = (10.0, 600.0)  # first and longest wait after a 401/403; doubles in between


@dataclass(frozen=True)
class DeliveryStats:
    """Counters of a reporter's requests since it started."""

    sent: int
    pending: int
    dropped: int
    rejected: int
    failed_attempts: int
    auth_failures: int = 0  # requests refused 401/403 (each is kept and tried again later)


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    body: dict[str, Any] | None


class _Retryable(Exception):
    """A request that may succeed later (network error, timeout, 5xx, 429), after ``retry_after`` s if given."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Unauthorized(_Retryable):
    """A 401/403: retrying helps only once the token is fixed, so it is retried after a growing backoff."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status, self.detail = status, detail


class _Rejected(Exception):
    """A request the aggregator refused for good (4xx other than 429)."""


class Delivery:
    """A FIFO of requests to one aggregator, sent in order by whoever calls `deliver`."""

    def __init__(self, url: str, token: str | None, *, timeout_seconds: float = 5.0, max_pending: int = 64):
        self._url = url.rstrip("/")
        self._headers = {"Content-Type": "application/json", "User-Agent": "mfumon-reporter"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._timeout = timeout_seconds
        # Proxies from the environment are honoured, except for the loopback aggregator of a single host.
        handlers = [urllib.request.ProxyHandler({})] if urlsplit(self._url).hostname in _LOOPBACK_HOSTS else []
        self._opener = urllib.request.build_opener(*handlers)
        self._queue: collections.deque[_Request] = collections.deque()
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._sent = self._dropped = self._rejected = self._failed = 0
        self._failing = False
        self._auth_told = False  # the 401/403 hint is logged once per reporter
        self._auth_in_row = self._auth_failures = 0
        self._auth_not_before = 0.0
        self._not_before = 0.0  # monotonic time before which the aggregator asked not to be called (Retry-After)
        self._rng = random.Random()
        self.last_response: dict[str, Any] | None = None

    def enqueue(self, method: str, path: str, body: dict[str, Any] | None = None) -> None:
        """Queue a request; when the queue is full the oldest one is dropped (and counted)."""
        with self._lock:
            self._queue.append(_Request(method, path, body))
            while len(self._queue) > self._max_pending:
                self._queue.popleft()
                self._dropped += 1

    def deliver(self, deadline_seconds: float | None = None) -> bool:
        """Send queued requests oldest first until one fails or time is up; True when the queue is empty."""
        stop_at = None if deadline_seconds is None else monotonic() + deadline_seconds
        if self._auth_in_row and monotonic() < self._auth_not_before:
            return not self.stats().pending  # backing off after a 401/403, quietly: its hint was logged once
        error: str | None = None
        wait = self._not_before - monotonic()
        if wait > 0 and self.stats().pending:
            if stop_at is not None and monotonic() + wait > stop_at:
                self._log_round(f"the aggregator asked to retry in {wait:.1f} s")
                return False
            sleep(wait)
        while True:
            with self._lock:
                if not self._queue:
                    break
                request = self._queue[0]
            timeout = self._timeout
            if stop_at is not None:
                timeout = min(timeout, stop_at - monotonic())
                if timeout <= 0:
                    error = "no time left"
                    break
            try:
                response = self._send(request, timeout)
            except _Unauthorized as exc:
                self._on_unauthorized(request, exc)
                return False
            except _Retryable as exc:
                with self._lock:
                    self._failed += 1
                    if exc.retry_after is not None:  # never sooner, and not in lockstep with other jobs
                        self._not_before = monotonic() + spread(exc.retry_after, self._rng)
                error = str(exc)
                break
            except _Rejected as exc:
                with self._lock:
                    self._pop(request)
                    self._rejected += 1
                logger.warning("mfumon aggregator rejected %s %s: %s", request.method, request.path, exc)
                continue
            with self._lock:
                self._pop(request)
                self._sent += 1
                self._auth_in_row = 0
            if request.path.endswith("/reports"):
                self.last_response = response
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("%s", describe_exchange(request.body or {}, response))
        self._log_round(error)
        return error is None

    def stats(self) -> DeliveryStats:
        with self._lock:
            return DeliveryStats(
                self._sent, len(self._queue), self._dropped, self._rejected, self._failed, self._auth_failures
            )

    def _on_unauthorized(self, request: _Request, exc: _Unauthorized) -> None:
        """Count it, say the fix the first time, and stay away for a growing while."""
        with self._lock:
            self._failed += 1
            self._auth_failures += 1
            self._auth_in_row += 1
            first, longest = _AUTH_BACKOFF_SECONDS
            wait = min(longest, first * 2 ** (self._auth_in_row - 1))
            self._auth_not_before = monotonic() + spread(wait / 1.5, self._rng)
        level = logging.DEBUG if self._auth_told else logging.WARNING
        hint = auth_hint(exc.status, exc.detail, flags=_TOKEN_FIX)
        logger.log(level, "mfumon aggregator %s: %s %s refused: %s", self._url, request.method, request.path, hint)
        self._auth_told = True

    def _pop(self, request: _Request) -> None:
        if self._queue and self._queue[0] is request:
            self._queue.popleft()

    def _log_round(self, error: str | None) -> None:
        stats = self.stats()
        if error is not None:
            logger.warning(
                "mfumon aggregator %s unreachable (%s): %d report(s) kept for retry, %d dropped so far",
                self._url,
                error,
                stats.pending,
                stats.dropped,
            )
            self._failing = True
        elif self._failing:
            logger.info("mfumon aggregator %s reachable again (%d dropped while it was not)", self._url, stats.dropped)
            self._failing = False

    def _send(self, request: _Request, timeout: float) -> dict[str, Any] | None:
        data = None if request.body is None else json.dumps(request.body).encode()
        http_request = urllib.request.Request(
            self._url + request.path, data=data, method=request.method, headers=self._headers
        )
        try:
            with self._opener.open(http_request, timeout=timeout) as reply:
                payload = reply.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode(errors="replace")
            if exc.code in AUTH_STATUSES:
                raise _Unauthorized(exc.code, detail) from exc
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(f"HTTP {exc.code}", retry_after_seconds(exc.headers.get("Retry-After"))) from exc
            raise _Rejected(f"HTTP {exc.code}: {detail}") from exc
        except (OSError, ValueError) as exc:  # URLError, timeouts, resets, a malformed URL
            raise _Retryable(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from exc
        try:
            parsed = json.loads(payload) if payload else None
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None


def describe_exchange(report: dict[str, Any], answer: dict[str, Any] | None) -> str:
    """One line for a report and the aggregator's answer: what ``mfumon wrap -v`` prints for each report."""
    rate = report.get("tokens_per_second")
    if rate is None and report.get("interval_seconds"):
        rate = report.get("tokens", 0) / report["interval_seconds"]
    parts = [f"report sent: {rate or 0:,.0f} tokens/s"]
    if report.get("step") is not None:
        parts.append(f"step {report['step']}")
    for key, label in (("step_seconds", "s/step"), ("comm_seconds", "s comm"), ("data_wait_seconds", "s data wait")):
        if report.get(key) is not None:
            parts.append(f"{report[key]:.3f} {label}")
    if answer is None:
        outcome = "the aggregator sent no JSON answer"
    elif answer.get("mfu") is None:
        outcome = f"MFU null: {answer.get('reason') or 'no reason given'}"
    else:
        outcome = f"MFU {answer['mfu']:.3f}"
    return f"{', '.join(parts)} -> {outcome}"
