"""The exporter's own health: self-metrics in a private registry, and a tiny HTTP server for them.

The HTTP endpoint serves ``/metrics`` (this registry only: GPU counters go to the aggregator, not here), ``/healthz``
(200 while collections succeed, 503 when the last success is too old) and ``/`` (links). It runs in a daemon thread
and never blocks collection.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["PUSH_OUTCOMES", "ExporterMetrics", "MetricsServer", "parse_listen_address"]

logger = logging.getLogger(__name__)

#: Outcomes of one push attempt: accepted, rejected for good (4xx, dropped), or failed and retried later.
PUSH_OUTCOMES: tuple[str, ...] = ("success", "rejected", "error")

HealthFn = Callable[[], tuple[bool, dict[str, Any]]]


class ExporterMetrics:
    """Every self-metric of one exporter, registered in its own :class:`CollectorRegistry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()
        self.collections = Counter("mfumon_exporter_collections", "Collection cycles completed.", registry=r)
        self.collection_duration = Histogram(
            "mfumon_exporter_collection_duration_seconds",
            "Wall time of one collection cycle.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=r,
        )
        self.collector_errors = Counter(
            "mfumon_exporter_collector_errors", "Failed counter reads and failed collection cycles.", registry=r
        )
        self.push = Counter("mfumon_exporter_push", "Push attempts by outcome.", ["outcome"], registry=r)
        self.auth_failures = Counter(
            "mfumon_exporter_auth_failures",
            "Requests the aggregator refused for the token (401, 403); the first is logged with the fix.",
            ["status"],
            registry=r,
        )
        for outcome in PUSH_OUTCOMES:
            self.push.labels(outcome)
        for status in ("401", "403"):
            self.auth_failures.labels(status)
        self.push_duration = Histogram(
            "mfumon_exporter_push_duration_seconds", "Wall time of one push attempt.", registry=r
        )
        self.spool_batches = Gauge("mfumon_exporter_spool_batches", "Batches waiting in the spool.", registry=r)
        self.spool_bytes = Gauge("mfumon_exporter_spool_bytes", "Bytes waiting in the spool.", registry=r)
        self.spool_dropped = Counter(
            "mfumon_exporter_spool_dropped", "Batches dropped because the spool was full.", registry=r
        )
        self.queue_dropped = Counter(
            "mfumon_exporter_queue_dropped", "Batches dropped because the in-memory queue was full.", registry=r
        )
        self.gpus = Gauge("mfumon_exporter_gpus", "Devices in the last collection, by state.", ["state"], registry=r)
        for state in ("up", "lost"):
            self.gpus.labels(state)
        self.last_collection = Gauge(
            "mfumon_exporter_last_collection_timestamp_seconds", "When the last collection succeeded.", registry=r
        )
        self.last_push_success = Gauge(
            "mfumon_exporter_last_push_success_timestamp_seconds", "When a push last succeeded.", registry=r
        )
        self.info = Gauge("mfumon_exporter_info", "Exporter identity (value 1).", ["node", "source"], registry=r)
        # Serving engines read by the inference collector (exporter/node/inference).
        self.inference_endpoints = Gauge(
            "mfumon_exporter_inference_endpoints", "Serving endpoints read, by origin.", ["origin"], registry=r
        )
        self.inference_scrapes = Counter(
            "mfumon_exporter_inference_scrapes",
            "Reads of serving engines' metrics by outcome.",
            ["outcome"],
            registry=r,
        )
        self.inference_reports = Counter(
            "mfumon_exporter_inference_reports", "Inference reports posted, by outcome.", ["outcome"], registry=r
        )
        for origin in ("config", "discovered"):
            self.inference_endpoints.labels(origin)
        for outcome in ("success", "error"):
            self.inference_scrapes.labels(outcome)
        for outcome in PUSH_OUTCOMES:
            self.inference_reports.labels(outcome)
        self.inference_restarts = Counter(
            "mfumon_exporter_inference_engine_restarts", "Serving engine restarts seen (counters reset).", registry=r
        )


def parse_listen_address(address: str) -> tuple[str, int]:
    """``":9428"`` -> ``("", 9428)`` (all interfaces); ``"127.0.0.1:9428"``; ``"[::1]:9428"``."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"listen address must look like HOST:PORT or :PORT, got {address!r}")
    return host.strip("[]"), int(port)


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http: " + format, *args)


class MetricsServer:
    """Serves ``/metrics``, ``/healthz`` and ``/`` for one :class:`ExporterMetrics` in a daemon thread."""

    def __init__(self, address: str, metrics: ExporterMetrics, health: HealthFn) -> None:
        host, port = parse_listen_address(address)
        self._metrics = metrics
        self._health = health
        server_class = _ThreadingServer6 if ":" in host else _ThreadingServer
        self._server = make_server(host, port, self._app, server_class=server_class, handler_class=_QuietHandler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="mfumon-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            body = generate_latest(self._metrics.registry)
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
            return [body]
        if path == "/healthz":
            ok, info = self._health()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "application/json")])
            return [json.dumps({"status": "ok" if ok else "failing", **info}).encode()]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html")])
            return [b'<html><body>mfumon exporter: <a href="/metrics">/metrics</a> <a href="/healthz">/healthz</a>']
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
