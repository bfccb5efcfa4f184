"""The inference loop: scrape every serving endpoint each interval and post what it did as an inference report.

Runs in its own thread, apart from GPU collection, so a slow or hung engine never delays GPU samples. Each cycle reads
the configured endpoints and (with discovery on) the engines found on this node, turns the counters' increase since
the previous scrape into ``prefill_tokens``/``decode_tokens`` and the scheduler's state into ``batch_size``,
``context_tokens``, ``requests_running``/``waiting`` and ``kv_cache_usage``, adds what the engine's request histograms
and counters say about the interval (``engine``, ``requests_finished``, ``preemptions``, ``request_running_seconds``
and the ``ttft``/``tpot``/``itl``/``queue`` histograms' increase, for SLO goodput and the serving waterfall), and
posts them to ``POST /v1/jobs/{job_id}/reports``. When a post fails (aggregator down), the previous reading is kept, so
the next report covers the whole gap; a report the aggregator rejects (4xx) is logged once per endpoint and dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from mfumon.exporter.auth import AUTH_STATUSES, auth_hint
from mfumon.exporter.node.inference.endpoints import InferenceEndpoint, describe_model
from mfumon.exporter.node.inference.engines import EngineReading, parse_engine_metrics
from mfumon.exporter.node.inference.window import serving_interval
from mfumon.exporter.node.selfmetrics import ExporterMetrics
from mfumon.exporter.transport import FreshConnectionRetry

__all__ = ["InferenceCollector"]

logger = logging.getLogger(__name__)

_KV_DTYPES = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
_RETRY_STATUS = frozenset({401, 403, 404, 408, 425, 429})
_INFERENCE_TOKEN_FIX = "--inference.token-file FILE (a token allowed to write jobs), else --token-file FILE, or the "
_INFERENCE_TOKEN_FIX += "environment variable MFUMON_INFERENCE_TOKEN_FILE, MFUMON_TOKEN_FILE or MFUMON_TOKEN"


@dataclass
class _EndpointState:
    previous: EngineReading | None = None
    previous_at: float = 0.0
    warned: str | None = None
    model_from_name: dict[str, Any] | None = None
    weight_dtype_from_name: str | None = None
    looked_up_name: str | None = None


class InferenceCollector:
    """Reads serving engines and reports them as inference jobs.

    Args:
        url: the aggregator's base URL; ``token`` its ingest token (it must be allowed to write jobs).
        endpoints: configured endpoints (``--inference.url``).
        discover: returns the endpoints found on this node now (local processes), or None for none.
        node: this node's name, for the job ids of engines no scheduler names.
        node_gpu_model: the node's GPU model (NVML name), sent for engines whose job the exporters cannot attribute.
    """

    def __init__(
        self,
        *,
        url: str,
        endpoints: Sequence[InferenceEndpoint] = (),
        discover: Callable[[], list[InferenceEndpoint]] | None = None,
        node: str,
        token: str | None = None,
        interval_seconds: float = 10.0,
        metrics: ExporterMetrics | None = None,
        node_gpu_model: Callable[[], str | None] | None = None,
        scrape_timeout_seconds: float = 3.0,
        post_timeout_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"User-Agent": "mfumon-exporter"}
        self._scraper = httpx.Client(timeout=scrape_timeout_seconds, headers=headers, transport=transport)
        if token:
            headers = {**headers, "Authorization": f"Bearer {token}"}
        timeout = httpx.Timeout(post_timeout_seconds, connect=min(2.0, post_timeout_seconds))
        poster = FreshConnectionRetry(transport)  # a report that met a closing kept-alive connection goes again
        self._poster = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=poster)
        self._configured = list(endpoints)
        self._discover = discover
        self._node = node
        self._node_gpu_model = node_gpu_model or (lambda: None)
        self.interval_seconds = interval_seconds
        self.metrics = metrics or ExporterMetrics()
        self._clock = clock
        self._states: dict[str, _EndpointState] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mfumon-inference", daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_seconds)
        self._scraper.close()
        self._poster.close()

    def _run(self) -> None:
        next_due = time.monotonic()
        while not self._stop.is_set():
            try:
                self.collect_once()
            except Exception:  # the loop must outlive any one engine's surprise
                logger.exception("inference collection failed")
            next_due += self.interval_seconds
            now = time.monotonic()
            next_due = max(next_due, now)
            self._stop.wait(next_due - now)

    # -- one cycle -------------------------------------------------------------------------------------------------

    def endpoints(self) -> list[InferenceEndpoint]:
        """Configured endpoints, then discovered ones at other URLs."""
        found = list(self._configured)
        if self._discover is not None:
            try:
                discovered = self._discover()
            except OSError as exc:
                logger.warning("discovering serving engines failed: %s", exc)
                discovered = []
            urls = {endpoint.url for endpoint in found}
            found += [endpoint for endpoint in discovered if endpoint.url not in urls]
        for origin in ("config", "discovered"):
            count = sum(1 for e in found if (e.origin == "config") == (origin == "config"))
            self.metrics.inference_endpoints.labels(origin).set(count)
        return found

    def read(self, endpoint: InferenceEndpoint) -> EngineReading | None:
        """One scrape of one endpoint, or None (counted, logged) when it fails."""
        try:
            response = self._scraper.get(endpoint.url)
            response.raise_for_status()
            reading = parse_engine_metrics(response.text, endpoint.engine)
        except (httpx.HTTPError, ValueError) as exc:
            self.metrics.inference_scrapes.labels("error").inc()
            self._warn(endpoint, f"cannot read {endpoint.url}: {exc}")
            return None
        self.metrics.inference_scrapes.labels("success").inc()
        return reading

    def collect_once(self) -> list[dict[str, Any]]:
        """Scrape every endpoint; post a report for each that has a previous reading. Returns the bodies posted."""
        posted = []
        endpoints = self.endpoints()
        for endpoint in endpoints:
            state = self._states.setdefault(endpoint.url, _EndpointState())
            reading = self.read(endpoint)
            if reading is None:
                continue
            now = self._clock()
            previous, previous_at = state.previous, state.previous_at
            if previous is None or now <= previous_at:
                state.previous, state.previous_at = reading, now
                continue
            window = serving_interval(previous, reading, now - previous_at)
            if window.awaiting_completion(reading.engine):
                continue  # keep the older reading: the report covers the stretch once a request finishes
            if window.restarted:
                self.metrics.inference_restarts.inc()
                logger.info("%s restarted: counting its counters from zero", endpoint.url)
            job_id = self._job_id(endpoint, reading)
            body = {**self._metadata(endpoint, reading, state), **window.report_fields()}
            outcome = self._post(endpoint, job_id, body, state)
            if outcome != "error":  # on error keep the older reading: the next report covers the gap
                state.previous, state.previous_at = reading, now
            if outcome == "success":
                posted.append({"job_id": job_id, **body})
        alive = {endpoint.url for endpoint in endpoints}
        for url in [url for url in self._states if url not in alive]:
            del self._states[url]
        return posted

    def _job_id(self, endpoint: InferenceEndpoint, reading: EngineReading) -> str:
        return endpoint.job_id or self._fallback_job_id(endpoint, reading)

    def _fallback_job_id(self, endpoint: InferenceEndpoint, reading: EngineReading) -> str:
        return f"{self._node}-{reading.engine}-{endpoint.port or 80}"

    def _metadata(self, endpoint: InferenceEndpoint, reading: EngineReading, state: _EndpointState) -> dict[str, Any]:
        """The report's job fields: the endpoint's, else what the engine's metrics tell (model name, KV dtype)."""
        fields = endpoint.report_metadata()
        if "model" not in fields and reading.model_name and state.looked_up_name != reading.model_name:
            state.looked_up_name = reading.model_name
            state.model_from_name, state.weight_dtype_from_name = describe_model(reading.model_name)
        if "model" not in fields and state.model_from_name:
            fields["model"] = state.model_from_name
            if state.weight_dtype_from_name and "weight_dtype" not in fields:
                fields["weight_dtype"] = state.weight_dtype_from_name
        kv_dtype = _KV_DTYPES.get(reading.kv_cache_dtype or "")
        if kv_dtype and "kv_cache_dtype" not in fields:
            fields["kv_cache_dtype"] = kv_dtype
        if self._job_id(endpoint, reading) == self._fallback_job_id(endpoint, reading) and "gpu_model" not in fields:
            gpu_model = self._node_gpu_model()  # a job id no scheduler gave: exporters cannot attribute its GPUs
            if gpu_model:
                fields["gpu_model"] = gpu_model
        return fields

    def _post(self, endpoint: InferenceEndpoint, job_id: str, body: dict[str, Any], state: _EndpointState) -> str:
        try:
            response = self._poster.post(f"/v1/jobs/{quote(job_id, safe='')}/reports", json=body)
        except httpx.HTTPError as exc:
            self.metrics.inference_reports.labels("error").inc()
            self._warn(endpoint, f"posting the report of {job_id} failed: {exc}")
            return "error"
        if response.is_success:
            self.metrics.inference_reports.labels("success").inc()
            state.warned = None
            return "success"
        retry = response.status_code >= 500 or response.status_code in _RETRY_STATUS
        outcome = "error" if retry else "rejected"
        self.metrics.inference_reports.labels(outcome).inc()
        if response.status_code in AUTH_STATUSES:
            self.metrics.auth_failures.labels(str(response.status_code)).inc()
            hint = auth_hint(response.status_code, response.text, scope="ingest", flags=_INFERENCE_TOKEN_FIX)
            self._warn(endpoint, f"the report of {job_id} was refused: {hint}")
            return outcome
        self._warn(endpoint, f"the aggregator answered {response.status_code} for {job_id}: {response.text[:300]}")
        return outcome

    def _warn(self, endpoint: InferenceEndpoint, message: str) -> None:
        """Log a problem once per endpoint until it changes, then at debug level."""
        state = self._states.setdefault(endpoint.url, _EndpointState())
        level = logging.WARNING if state.warned != message else logging.DEBUG
        state.warned = message
        logger.log(level, "%s", message)
