"""The aggregator's own counters: ingest outcomes, unknown devices, scrape and refresh cost.

Plain integers behind a lock rather than prometheus_client objects, because ``/metrics`` is rendered by our
own cached renderer (see :mod:`mfumon.api.metrics.render`).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mfumon.api.connections import ConnectionGuard
    from mfumon.api.metrics.scrapes import ScrapeCache


class SelfMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ingest: Counter[tuple[str, str]] = Counter()  # (endpoint, outcome) -> count
        self.unknown_devices: Counter[str] = Counter()  # reported gpu_model -> reports
        self.gpu_samples = 0
        self.last_scrape_duration_seconds = 0.0
        self.token_writes: Counter[tuple[str, str, str]] = Counter()  # (token name, endpoint, outcome) -> writes
        self.body_timeouts = 0
        self.refused: Counter[str] = Counter()  # cardinality limit -> requests refused (or labels folded)
        self.max_unknown_devices = 64
        self.reads_rejected: Counter[str] = Counter()  # "api" or "metrics" -> reads answered 503 (slots busy)
        self.connections: ConnectionGuard | None = None  # mfumon serve's connection guard, absent in tests
        self.scrapes: ScrapeCache | None = None  # /metrics bodies rendered and reused

    def count_ingest(self, endpoint: str, outcome: str) -> None:
        with self._lock:
            self.ingest[(endpoint, outcome)] += 1

    def count_gpu_samples(self, n: int) -> None:
        with self._lock:
            self.gpu_samples += n

    def count_unknown_device(self, gpu_model: str) -> None:
        """Count a report naming a GPU with no known peak; past the distinct-model limit the label is "other"."""
        with self._lock:
            key = gpu_model[:128]
            if key not in self.unknown_devices and len(self.unknown_devices) >= self.max_unknown_devices:
                key = "other"
                self.refused["unknown_gpu_models"] += 1
            self.unknown_devices[key] += 1

    def count_read_rejected(self, group: str) -> None:
        with self._lock:
            self.reads_rejected[group] += 1

    def copy_reads_rejected(self) -> dict[str, int]:
        with self._lock:
            return dict(self.reads_rejected)

    def count_refused(self, limit: str) -> None:
        with self._lock:
            self.refused[limit] += 1

    def copy_refused(self) -> dict[str, int]:
        with self._lock:
            return dict(self.refused)

    def count_token_write(self, token_name: str, endpoint: str, outcome: str) -> None:
        with self._lock:
            self.token_writes[(token_name, endpoint, outcome)] += 1

    def count_body_timeout(self) -> None:
        with self._lock:
            self.body_timeouts += 1

    def connection_counts(self) -> tuple[int | None, dict[str, int]]:
        """Open connections (None outside mfumon serve) and connections closed by reason (408s included)."""
        with self._lock:
            closed = {"body_timeout": self.body_timeouts}
        if self.connections is None:
            return None, closed
        return self.connections.open, {**self.connections.closed(), **closed}

    def copy_token_writes(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            return dict(self.token_writes)

    def copy(self) -> tuple[dict[tuple[str, str], int], dict[str, int], int]:
        with self._lock:
            return dict(self.ingest), dict(self.unknown_devices), self.gpu_samples
