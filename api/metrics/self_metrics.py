"""The aggregator's own counters (ingest outcomes, unknown devices, scrape and refresh cost), their families and how
they are rendered, side by side.

Plain integers behind a lock rather than prometheus_client objects, because ``/metrics`` is rendered by our
own cached renderer (see :mod:`mfumon.api.metrics.store`). Few series: rendered on every scrape (shard 0 only).
"""

from __future__ import annotations

import threading
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from mfumon.api.metrics._text import Rows, counter, declare, family_text, gauge

if TYPE_CHECKING:
    from mfumon.api.metrics.scrapes import ScrapeCache
    from mfumon.api.server.guard import ConnectionGuard

try:
    _VERSION = version("mfu-monitor")
except PackageNotFoundError:  # running from a source tree without installing
    _VERSION = "unknown"

# Rendered after the cluster, pool and team families.
SELF_FAMILIES = declare(
    counter("ingest_requests_total", "Ingest requests by endpoint and outcome."),
    counter("ingest_gpu_samples_total", "GPU samples received in node pushes."),
    counter("unknown_device_reports_total", "Job reports whose GPU model has no peak in the table (MFU unknown)."),
    counter(
        "token_writes_total", "Writes by the name of the token that made them (never the token), endpoint, outcome."
    ),
    counter(
        "ingest_refused_total",
        "Writes refused at a cardinality limit (nodes, gpus, gpus_per_node, active_jobs); for "
        "unknown_gpu_models, reports whose GPU model was counted as 'other'.",
    ),
    counter("read_requests_rejected_total", "Reads answered 503 because every read slot stayed busy (api, metrics)."),
    gauge("http_connections", "Open HTTP connections (mfumon serve)."),
    counter(
        "http_connections_closed_total",
        "Connections the server closed on a client: header/body/write timeout, evicted or refused at the cap.",
    ),
    gauge("scrape_duration_seconds", "Time the previous /metrics render took."),
    counter(
        "metrics_renders_total",
        "Series rendered ahead of scrapes, by kind (node, job, job_gpus), or by a scrape that found them stale. "
        "A node is rendered ahead at most once per scrape interval, however often it pushes (a later push is "
        "rendered by the next scrape): node renders over node pushes and over scrapes say how many.",
    ),
    gauge(
        "metrics_renders_pending",
        "Nodes pushed and not rendered yet: waiting for the renderer, or left to the next scrape (which renders them).",
    ),
    counter(
        "metrics_scrapes_total",
        "Scrapes of /metrics by outcome: rendered, or reused (the same shard rendered within "
        "MFUMON_METRICS_MAX_AGE_SECONDS).",
    ),
    gauge("state_refresh_duration_seconds", "Time the last read of rows other replicas changed took."),
    counter("state_refresh_errors_total", "Failed reads of other replicas' changes (and lost notification links)."),
    gauge("sample_queue_nodes", "Nodes whose newest pushed sample is not stored in the database yet."),
    gauge(
        "sample_queue_age_seconds",
        "Age of the oldest pushed sample not stored yet: what a crash could lose (0 when all are stored).",
    ),
    gauge("sample_flush_duration_seconds", "Time the last group commit of node samples took."),
    counter("sample_flush_errors_total", "Group commits of node samples that failed (their samples are retried)."),
    gauge("build_info", "Build information; value 1."),
)


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


def render_self_metrics(
    metrics: SelfMetrics,
    renders: list[tuple[str, int]],
    renders_pending: int,
    refresh: tuple[float, int],
    flush: tuple[int, float, float, int],
) -> str:
    """The self series: ``metrics``' counters, and what the store and the state pass in: chunks rendered by kind
    and nodes waiting, the last refresh (seconds, errors) and the sample queue (nodes, oldest age, last flush
    seconds, flush errors)."""
    out: list[str] = []

    def emit(name: str, rows: Rows) -> None:
        out.append(family_text(SELF_FAMILIES[name], rows))

    ingest, unknown, gpu_samples = metrics.copy()
    emit(
        "mfumon_ingest_requests_total",
        [([("endpoint", e), ("outcome", o)], n) for (e, o), n in sorted(ingest.items())],
    )
    emit("mfumon_ingest_gpu_samples_total", [([], gpu_samples)])
    emit("mfumon_unknown_device_reports_total", [([("gpu_model", m)], n) for m, n in sorted(unknown.items())])
    token_writes = sorted(metrics.copy_token_writes().items())
    emit(
        "mfumon_token_writes_total",
        [([("token_name", t), ("endpoint", e), ("outcome", o)], n) for (t, e, o), n in token_writes],
    )
    refused = sorted(metrics.copy_refused().items())
    emit("mfumon_ingest_refused_total", [([("limit", limit)], n) for limit, n in refused])
    rejected = sorted(metrics.copy_reads_rejected().items())
    emit("mfumon_read_requests_rejected_total", [([("group", g)], n) for g, n in rejected])
    open_connections, closed = metrics.connection_counts()
    if open_connections is not None:
        emit("mfumon_http_connections", [([], open_connections)])
    emit("mfumon_http_connections_closed_total", [([("reason", r)], n) for r, n in sorted(closed.items())])
    emit("mfumon_scrape_duration_seconds", [([], metrics.last_scrape_duration_seconds)])
    emit("mfumon_metrics_renders_total", [([("kind", kind)], n) for kind, n in renders])
    emit("mfumon_metrics_renders_pending", [([], renders_pending)])
    if (scrapes := metrics.scrapes) is not None:
        emit("mfumon_metrics_scrapes_total", [([("outcome", o)], n) for o, n in scrapes.counts().items()])
    refresh_seconds, refresh_errors = refresh
    emit("mfumon_state_refresh_duration_seconds", [([], refresh_seconds)])
    emit("mfumon_state_refresh_errors_total", [([], refresh_errors)])
    queued, age_seconds, flush_seconds, flush_errors = flush
    emit("mfumon_sample_queue_nodes", [([], queued)])
    emit("mfumon_sample_queue_age_seconds", [([], age_seconds)])
    emit("mfumon_sample_flush_duration_seconds", [([], flush_seconds)])
    emit("mfumon_sample_flush_errors_total", [([], flush_errors)])
    emit("mfumon_build_info", [([("version", _VERSION)], 1)])
    return "".join(out)
