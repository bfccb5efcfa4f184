"""Simulated serving engines for ``mfumon demo``: a vLLM-style and a TGI-style ``/metrics`` over real HTTP.

Each :class:`SimServingJob` runs one engine on its own loopback port; the demo's node exporter reads it with the real
inference collector (``mfumon.exporter.node.inference``), exactly as it reads a real server. The engine's counters
follow the job's targets through the MBU arithmetic and the peak table the aggregator uses (:mod:`mfumon.mfu`), so
the aggregator's MBU lands near the target:

    bytes per decode step = params x 2 + batch x context x (2 x layers x kv_heads x head_dim x 2)     (bf16)
    decode tokens/s       = target MBU x GPUs x peak bandwidth x batch / bytes per decode step
    prefill tokens/s      = decode tokens/s x prompt length / output length    (every request: one of each)

A vLLM-style engine also exports its own MFU estimate (``--enable-mfu-metrics``, vLLM 0.17+): FLOPs per GPU by its
own convention (the matmuls and attention over each token's context, scheduled tokens only), which lands within a
few percent of ours, and the bytes it reads and writes. A TGI-style engine also reports the time it spends in
prefill, set by a target active prefill MFU. The metrics are registered with prometheus_client under the engines'
own names and labels (vLLM V1: ``vllm:*{model_name,engine}`` and ``cache_config_info``; TGI: ``tgi_*``), not the
engines' exact text.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from mfumon import mfu as engine
from mfumon.exporter.node.sources.sim import smooth_noise

__all__ = ["SimServingJob", "SimulatedEngine"]
_BLOCK_SIZE = 16


@dataclass(frozen=True, slots=True)
class SimServingJob:
    """A serving job the demo runs behind a simulated engine, and the behaviour to simulate.

    Targets should be physically consistent: a TGI-style job spends prefill tokens/s x FLOPs per token /
    (active prefill MFU x peak) of each second in prefill, and decodes in the rest.
    """

    job_id: str
    name: str
    team: str
    pool: str
    engine: str  # "vllm" or "tgi"
    gpu_model: str
    served_model: str
    params: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    placement: tuple[tuple[str, int], ...]
    batch: float  # sequences per decode step
    prompt_tokens: float  # mean prompt length
    output_tokens: float  # mean output length
    target_mbu: float
    waiting: float  # mean requests in the queue
    kv_cache_usage: float
    prefix_cache_hit_ratio: float = 0.0
    prefill_active_mfu: float = 0.4  # TGI: MFU while the engine computes prompts

    @property
    def num_gpus(self) -> int:
        return len(self.placement)

    @property
    def context_tokens(self) -> float:
        """Mean context of a sequence being decoded: its prompt and half its output."""
        return self.prompt_tokens + self.output_tokens / 2

    @property
    def peak_flops_per_gpu(self) -> float:
        """The dense bf16 peak of this job's GPUs, from the aggregator's peak table."""
        peak = engine.default_peak_table().lookup(self.gpu_model, "bf16").peak_flops_per_gpu
        assert peak is not None, f"{self.gpu_model} has no bf16 peak"
        return peak

    def prompt_flops_per_token(self) -> float:
        """FLOPs of one prompt token in prefill: 2N plus attention over the prompt (the engine's one formula)."""
        shape = engine.ModelShape(
            params=self.params,
            layers=self.layers,
            heads=self.heads,
            head_dim=self.head_dim,
            seq_len=round(self.prompt_tokens),
        )
        return engine.flops_per_token(shape, "inference")

    def decode_tokens_per_second(self) -> float:
        shape = engine.ModelShape(
            params=self.params, layers=self.layers, heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_dim
        )
        weights, kv_bytes_per_token = engine.weight_bytes(shape, "bf16"), engine.kv_cache_bytes_per_token(shape, "bf16")
        assert weights is not None and kv_bytes_per_token is not None
        step_bytes = engine.decode_step_bytes(weights, kv_bytes_per_token, self.batch, self.context_tokens)
        bandwidth = engine.default_peak_table().bandwidth(self.gpu_model).bytes_per_second
        assert bandwidth is not None, f"{self.gpu_model} has no peak memory bandwidth"
        return self.target_mbu * self.num_gpus * bandwidth * self.batch / step_bytes

    def expected_mfu(self) -> float:
        """The MFU its reports should show: prompt tokens computed and tokens generated, 2N FLOPs each, over the peak.

        The demo's GPUs of this job run tensor work in step with it, so the cross-check with the hardware agrees.
        """
        decode = self.decode_tokens_per_second()
        prefill = decode / self.output_tokens * self.prompt_tokens * (1.0 - self.prefix_cache_hit_ratio)
        flops_per_token = engine.flops_per_token(engine.ModelShape(params=self.params), "inference")
        return flops_per_token * (prefill + decode) / (self.num_gpus * self.peak_flops_per_gpu)

    def endpoint_options(self) -> str:
        """The ``--inference.url`` options that describe this job's model to the exporter."""
        shape = f"params={self.params:g},layers={self.layers},heads={self.heads},kv_heads={self.kv_heads}"
        labels = f"name={self.name},team={self.team},pool={self.pool}"
        return f"job_id={self.job_id},{shape},head_dim={self.head_dim},{labels}"


class SimulatedEngine:
    """One engine: counters advanced to the wall clock on every scrape, served on
    ``http://127.0.0.1:<port>/metrics``."""

    def __init__(self, job: SimServingJob, seed: int = 0, clock: Callable[[], float] = time.time) -> None:
        self.job = job
        self._seed = seed
        self._clock = clock
        self._lock = threading.Lock()
        self._last = clock()
        self._stream = sum(map(ord, job.job_id))
        self.registry = CollectorRegistry()
        self._metrics = _vllm_metrics(self.registry, job) if job.engine == "vllm" else _tgi_metrics(self.registry, job)
        self._server: ThreadingHTTPServer | None = None
        self._unfinished = 0.0  # requests partly done: histograms get whole requests only

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the engine first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/metrics"

    def start(self) -> SimulatedEngine:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = engine.render()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name=f"sim-{self.job.job_id}", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def render(self) -> bytes:
        with self._lock:
            self.advance(self._clock())
            return generate_latest(self.registry)

    def advance(self, now: float) -> None:
        """Move the counters to ``now`` at the job's rates (with a little smooth noise) and set the gauges."""
        dt = max(0.0, now - self._last)
        self._last = now
        job, m = self.job, self._metrics
        wobble = 1.0 + 0.05 * smooth_noise(self._seed, self._stream, now, 60.0)
        decode = job.decode_tokens_per_second() * wobble * dt
        prompt = decode * job.prompt_tokens / job.output_tokens
        self._unfinished += decode / job.output_tokens
        finished = math.floor(self._unfinished)
        self._unfinished -= finished
        running = job.batch * (1.0 + 0.03 * smooth_noise(self._seed, self._stream + 1, now, 45.0))
        waiting = max(0.0, job.waiting * (1.0 + 0.3 * smooth_noise(self._seed, self._stream + 2, now, 30.0)))
        if job.engine == "vllm":
            m["prompt"].inc(prompt)
            m["hits"].inc(prompt * job.prefix_cache_hit_ratio)
            m["queries"].inc(prompt)
            m["generation"].inc(decode)
            for _ in range(finished):
                m["request_prompt"].observe(job.prompt_tokens)
                m["request_generation"].observe(job.output_tokens)
            m["running"].set(round(running))
            m["waiting"].set(round(waiting))
            m["kv"].set(job.kv_cache_usage * running / job.batch)
            # The engine's convention: 2N per token plus attention over each token's whole context (no causal half).
            attention = 4 * job.layers * job.heads * job.head_dim
            computed = prompt * (1.0 - job.prefix_cache_hit_ratio)  # it counts scheduled tokens: no cache hits
            flops = computed * (2 * job.params + attention * job.prompt_tokens)
            flops += decode * (2 * job.params + attention * job.context_tokens)
            m["engine_flops"].inc(flops / job.num_gpus)
            steps = decode / job.batch  # one weight read per decode step, split over the GPUs
            m["engine_read"].inc(steps * 2 * job.params / job.num_gpus)
            m["engine_write"].inc(decode * 2 * job.layers * job.kv_heads * job.head_dim * 2 / job.num_gpus)
        else:
            m["tgi"].advance(finished, decode, dt, running, waiting)


def _vllm_metrics(registry: CollectorRegistry, job: SimServingJob) -> dict[str, Any]:
    labels = ["model_name", "engine"]
    values = (job.served_model, "0")

    def counter(name: str, doc: str) -> Any:
        return Counter(name, doc, labels, registry=registry).labels(*values)

    def gauge(name: str, doc: str) -> Any:
        return Gauge(name, doc, labels, registry=registry).labels(*values)

    def histogram(name: str, doc: str) -> Any:
        buckets = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
        return Histogram(name, doc, labels, buckets=buckets, registry=registry).labels(*values)

    capacity_tokens = job.batch * job.context_tokens / job.kv_cache_usage
    cache = Gauge(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        ["block_size", "cache_dtype", "num_gpu_blocks", "engine"],
        registry=registry,
    )
    cache.labels(str(_BLOCK_SIZE), "auto", str(math.ceil(capacity_tokens / _BLOCK_SIZE)), "0").set(1)
    return {
        "running": gauge("vllm:num_requests_running", "Number of requests in model execution batches."),
        "waiting": gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
        "kv": gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
        "queries": counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."),
        "hits": counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."),
        "prompt": counter("vllm:prompt_tokens", "Number of prefill tokens processed."),
        "generation": counter("vllm:generation_tokens", "Number of generation tokens processed."),
        "request_prompt": histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed."),
        "request_generation": histogram("vllm:request_generation_tokens", "Number of generation tokens processed."),
        "engine_flops": counter(
            "vllm:estimated_flops_per_gpu", "Estimated number of floating point operations per GPU"
        ),
        "engine_read": counter(
            "vllm:estimated_read_bytes_per_gpu", "Estimated number of bytes read from memory per GPU"
        ),
        "engine_write": counter(
            "vllm:estimated_write_bytes_per_gpu", "Estimated number of bytes written to memory per GPU"
        ),
    }


def _tgi_metrics(registry: CollectorRegistry, job: SimServingJob) -> dict[str, Any]:
    state = _TgiState(job)
    registry.register(state)
    return {"tgi": state}


class _TgiState:
    """TGI's series, advanced by whole requests as TGI's per-request histograms are (a request's prompt counts when
    it arrives, its output when it ends); the time its prompt took follows the target active prefill MFU."""

    def __init__(self, job: SimServingJob) -> None:
        self.job = job
        self.requests = self.input_tokens = self.generated_tokens = 0.0
        self.prefill_calls = self.decode_calls = self.prefill_seconds = self.decode_seconds = 0.0
        self.batch = self.queue = 0.0
        self.max_total_tokens = round(job.batch * (job.prompt_tokens + job.output_tokens) / job.kv_cache_usage)

    def advance(self, finished: int, decode: float, dt: float, running: float, waiting: float) -> None:
        job = self.job
        prompt_flops = job.prompt_tokens * job.prompt_flops_per_token()
        prefill_seconds = finished * prompt_flops / (job.prefill_active_mfu * job.num_gpus * job.peak_flops_per_gpu)
        self.requests += finished
        self.input_tokens += finished * job.prompt_tokens
        self.generated_tokens += finished * job.output_tokens
        self.prefill_calls += finished
        self.decode_calls += decode / job.batch
        self.prefill_seconds += prefill_seconds
        self.decode_seconds += max(0.0, dt - prefill_seconds)
        self.batch, self.queue = round(running), round(waiting)

    def collect(self) -> Any:
        calls = CounterMetricFamily(
            "tgi_batch_inference_count", "Inference calls per method (prefill or decode)", labels=["method"]
        )
        calls.add_metric(["prefill"], math.floor(self.prefill_calls))
        calls.add_metric(["decode"], math.floor(self.decode_calls))
        yield calls
        yield GaugeMetricFamily("tgi_batch_current_size", "Current batch size", value=self.batch)
        yield GaugeMetricFamily("tgi_queue_size", "Current queue size", value=self.queue)
        current = self.job.kv_cache_usage * self.max_total_tokens * (1.0 if self.batch else 0.0)
        yield GaugeMetricFamily("tgi_batch_current_max_tokens", "Maximum tokens for the current batch", value=current)
        yield GaugeMetricFamily("tgi_batch_max_total_tokens", "", value=self.max_total_tokens)
        count = math.floor(self.requests)
        for name, doc, total in (
            ("tgi_request_input_length", "Input token length per request", self.input_tokens),
            ("tgi_request_generated_tokens", "Generated tokens per request", self.generated_tokens),
        ):
            yield HistogramMetricFamily(name, doc, buckets=[("+Inf", count)], sum_value=total)
        forward = HistogramMetricFamily(
            "tgi_batch_forward_duration", "Batch forward duration per method (prefill or decode)", labels=["method"]
        )
        forward.add_metric(["prefill"], [("+Inf", math.floor(self.prefill_calls))], self.prefill_seconds)
        forward.add_metric(["decode"], [("+Inf", math.floor(self.decode_calls))], self.decode_seconds)
        yield forward
