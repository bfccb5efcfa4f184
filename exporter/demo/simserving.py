"""Simulated serving engines for ``mfumon demo``: vLLM-, SGLang- and TGI-style ``/metrics`` over real HTTP.

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
prefill, set by a target active prefill MFU.

Latency and pressure, from one small model per engine (:class:`_LatencyModel`, seeded, so a seed and a clock give the
same text every time) that follows the engine's own state:

- a decode step takes ``batch / decode tokens/s`` on average (so TPOT grows with the batch and the context, whose KV
  cache each step reads). Part of each second goes to prompts (prefill share ``f`` = prompt tokens/s computed x
  seconds per prompt token at the job's active prefill MFU); a step that carries a prompt (or a chunk of a long one,
  ``chunk_tokens`` at most, vLLM's chunked prefill) takes that much longer, the others ``step x (1 - f)``: inter-token
  latency is per token, one observation per sequence in the step, and spikes on the steps that carry a prompt.
- queue time: Little's law, requests waiting / requests per second (a gamma draw around it; a fraction of a step when
  nothing waits). TTFT = queue + the prompt's own prefill (its chunks' steps). A request's TPOT is the mean step over
  the span it decoded in (±6 %); a preempted request (vLLM, KV cache full) also waits in the queue again and
  recomputes its prompt and output so far, which its decode time carries.
- scenarios per job: ``long_prompt_*`` (bursts of long prompts whose chunks ride a share of the steps: TPOT and ITL
  of everyone decoding then spike), ``preemptions_per_second``, ``idle_*`` (stretches with no request at all).

Names, help texts, label names, types and default buckets follow the engines' source (each engine's own exact text
is not copied: prometheus_client renders all three):

- vLLM 0.12 (``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``; the V1 engine, ``model_name`` and ``engine``
  labels, ``*_created`` twins of the default registry): ``vllm:time_to_first_token_seconds``,
  ``vllm:inter_token_latency_seconds`` (per token), ``vllm:request_time_per_output_token_seconds`` (per request, new in
  0.11), ``vllm:e2e_request_latency_seconds``, ``vllm:request_{queue,inference,prefill,decode}_time_seconds``,
  ``vllm:num_preemptions_total``, ``vllm:request_success_total{finished_reason}`` (every ``FinishReason``: stop,
  length, abort, error). 0.11 also printed the per-token ``vllm:time_per_output_token_seconds`` (deprecated; 0.12
  shows it only with ``--show-hidden-metrics-for-version=0.11``): not printed here.
- SGLang 0.5 (main at sgl-project/sglang@00ae9c1590d2, ``python/sglang/srt/metrics/collector.py``; multiprocess
  mode, so no ``*_created``): ``sglang:time_to_first_token_seconds``, ``sglang:inter_token_latency_seconds`` (per
  token), ``sglang:e2e_request_latency_seconds`` and ``sglang:num_retractions`` (tokenizer side, ``model_name``
  label), ``sglang:queue_time_seconds`` and ``sglang:num_retracted_requests_total`` (scheduler side, with the rank
  labels). That SGLang has no per-request time-per-output-token histogram: none is printed.
- TGI 3.3.7 (``router/src/server.rs``; metrics-exporter-prometheus 0.15, first description wins, unlabelled):
  ``tgi_request_queue_duration``, ``tgi_request_inference_duration``, ``tgi_request_validation_duration``,
  ``tgi_request_duration``, ``tgi_request_mean_time_per_token_duration`` (inference time / generated tokens, so the
  prompt's time is in it), all with the 35 geometric buckets 0.0001 x 1.5^k; ``tgi_request_success``,
  ``tgi_request_count``. TGI exports no time-to-first-token histogram and no preemption counter: none is printed.
"""

from __future__ import annotations

import math
import random
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from mfumon import mfu as engine
from mfumon.exporter.node.sources.sim import smooth_noise

__all__ = [
    "SGLANG_E2E_BUCKETS",
    "SGLANG_ITL_BUCKETS",
    "SGLANG_QUEUE_BUCKETS",
    "SGLANG_TTFT_BUCKETS",
    "TGI_DURATION_BUCKETS",
    "VLLM_REQUEST_LATENCY_BUCKETS",
    "VLLM_TPOT_BUCKETS",
    "VLLM_TTFT_BUCKETS",
    "SimServingJob",
    "SimulatedEngine",
]
_BLOCK_SIZE = 16

# -- the engines' default buckets (see the module docstring for the versions) ---------------------------------------
VLLM_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
)  # fmt: skip
#: vllm:inter_token_latency_seconds and vllm:request_time_per_output_token_seconds
VLLM_TPOT_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
#: e2e, queue, inference, prefill and decode time per request
VLLM_REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
)  # fmt: skip
SGLANG_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_E2E_BUCKETS = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400,
)  # fmt: skip
SGLANG_ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400,
    0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip
SGLANG_QUEUE_BUCKETS = (
    0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800,
    900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
)  # fmt: skip
SGLANG_RETRACTION_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 75, 100)


def _tgi_duration_buckets() -> tuple[float, ...]:
    """TGI's 35 duration buckets: 0.0001 x 1.5, x 1.5 again..., computed as the router computes them (f64)."""
    value, buckets = 0.0001, []
    for _ in range(35):
        value *= 1.5
        buckets.append(value)
    return tuple(buckets)


TGI_DURATION_BUCKETS = _tgi_duration_buckets()


def _build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, 20, 50... up to ``max_value``."""
    buckets: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(value)
        exponent += 1


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
    engine: str  # "vllm", "sglang" or "tgi"
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
    prefill_active_mfu: float = 0.4  # MFU while the engine computes prompts (TGI reports its prefill time)
    max_model_len: int = 131072
    chunk_tokens: int = 2048  # prompt tokens one step computes at most (chunked prefill)
    #: requests the engine preempts per second to free KV-cache blocks (vLLM: recomputed when they resume)
    preemptions_per_second: float = 0.0
    #: bursts of long prompts: this long, for ``long_prompt_burst_seconds`` at the end of every period, their chunks
    #: riding ``long_prompt_step_share`` of the steps (0: none)
    long_prompt_tokens: float = 0.0
    long_prompt_every_seconds: float = 0.0
    long_prompt_burst_seconds: float = 0.0
    long_prompt_step_share: float = 0.0
    #: running sequences during a burst, x the batch (reached 10 s into it): requests keep arriving while each takes
    #: longer, and chunked prefill admits them into the batch rather than the queue (Little's law)
    long_prompt_running_growth: float = 1.0
    #: no request at all for ``idle_seconds`` at the end of every ``idle_every_seconds`` (0: always busy)
    idle_every_seconds: float = 0.0
    idle_seconds: float = 0.0
    #: the job's own latency targets (``slo`` of ``PUT /v1/jobs/{id}``), as (name, value) pairs; () = the defaults
    slo: tuple[tuple[str, float], ...] = ()

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

    def prompt_flops_per_token(self, prompt_tokens: float | None = None) -> float:
        """FLOPs of one prompt token in prefill: 2N plus attention over the prompt (the engine's one formula)."""
        shape = engine.ModelShape(
            params=self.params,
            layers=self.layers,
            heads=self.heads,
            head_dim=self.head_dim,
            seq_len=round(self.prompt_tokens if prompt_tokens is None else prompt_tokens),
        )
        return engine.flops_per_token(shape, "inference")

    def prefill_seconds_per_token(self, prompt_tokens: float | None = None) -> float:
        """Seconds one prompt token takes at the job's active prefill MFU, on all its GPUs."""
        speed = self.prefill_active_mfu * self.num_gpus * self.peak_flops_per_gpu
        return self.prompt_flops_per_token(prompt_tokens) / speed

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

    def requests_per_second(self) -> float:
        """Requests finished (and arriving) per second while the job is busy and no long prompts come."""
        return self.decode_tokens_per_second() / self.output_tokens

    def expected_mfu(self) -> float:
        """The MFU its reports should show: prompt tokens computed and tokens generated, 2N FLOPs each, over the peak.

        The demo's GPUs of this job run tensor work in step with it, so the cross-check with the hardware agrees.
        """
        decode = self.decode_tokens_per_second()
        prefill = decode / self.output_tokens * self.prompt_tokens * (1.0 - self.prefix_cache_hit_ratio)
        flops_per_token = engine.flops_per_token(engine.ModelShape(params=self.params), "inference")
        return flops_per_token * (prefill + decode) / (self.num_gpus * self.peak_flops_per_gpu)

    def busy_at(self, elapsed: float) -> bool:
        """Whether requests come ``elapsed`` seconds after the engine started (False in an idle stretch)."""
        if self.idle_every_seconds <= 0 or self.idle_seconds <= 0:
            return True
        return elapsed % self.idle_every_seconds < self.idle_every_seconds - self.idle_seconds

    def long_prompts_at(self, elapsed: float) -> bool:
        """Whether a burst of long prompts is being prefilled ``elapsed`` seconds after the engine started."""
        return self.into_burst(elapsed) is not None

    def into_burst(self, elapsed: float) -> float | None:
        """Seconds since the current burst of long prompts began (None outside one)."""
        if self.long_prompt_every_seconds <= 0 or self.long_prompt_tokens <= 0:
            return None
        period = self.long_prompt_every_seconds
        into = elapsed % period - (period - self.long_prompt_burst_seconds)
        return into if into >= 0 else None

    def slo_json(self) -> dict[str, float] | None:
        """The job's ``slo`` object (None: the aggregator's defaults apply)."""
        return dict(self.slo) if self.slo else None

    def endpoint_options(self) -> str:
        """The ``--inference.url`` options that describe this job's model to the exporter."""
        shape = f"params={self.params:g},layers={self.layers},heads={self.heads},kv_heads={self.kv_heads}"
        labels = f"name={self.name},team={self.team},pool={self.pool}"
        return f"job_id={self.job_id},{shape},head_dim={self.head_dim},{labels}"


@dataclass(frozen=True, slots=True)
class _Request:
    """One finished request, as the engine times it (seconds)."""

    prompt_tokens: float
    output_tokens: float
    queue: float  # arrived (queued) -> first scheduled
    prefill: float  # first scheduled -> first token
    decode: float  # first token -> last token (a preemption's requeue and recompute included)
    preemptions: int
    finished_reason: str

    @property
    def ttft(self) -> float:
        return self.queue + self.prefill

    @property
    def tpot(self) -> float:
        """vLLM's per-request time per output token: decode time / (generated tokens - 1)."""
        return self.decode / max(1.0, self.output_tokens - 1)

    @property
    def inference(self) -> float:
        return self.prefill + self.decode

    @property
    def e2e(self) -> float:
        return self.queue + self.prefill + self.decode


@dataclass(slots=True)
class _Interval:
    """What the engine did over one stretch of time."""

    busy: bool
    seconds: float  # wall-clock length of the stretch
    running: float
    waiting: float
    decode_tokens: float  # generated
    prompt_tokens: float  # prompt tokens of requests whose prefill ran (normal and long)
    computed_prompt_tokens: float  # those not found in the prefix cache
    long_prompt_tokens: float
    recomputed_tokens: float  # prompt and output of preempted requests, computed again
    preemptions: int
    steps: list[tuple[float, int]]  # (inter-token latency, sequences that got a token in that step)
    finished: list[_Request]


class _LatencyModel:
    """The engine's state over time and the requests it finishes (see the module docstring)."""

    def __init__(self, job: SimServingJob, seed: int, started: float) -> None:
        self.job = job
        self._seed = seed
        self._stream = sum(map(ord, job.job_id))
        self._started = started
        self._rng = random.Random(f"{seed}/{job.job_id}")
        self._unfinished = 0.0  # requests partly done: histograms get whole requests only
        self._step_carry = 0.0
        self._long_carry = 0.0  # long prompts partly computed
        self._preempt_carry = 0.0
        self._long_pending = 0  # long prompts computed whose requests have not finished yet
        self.decode_rate = job.decode_tokens_per_second()
        self.request_rate = job.requests_per_second()
        self.t_prompt = job.prefill_seconds_per_token()
        self.t_long = job.prefill_seconds_per_token(job.long_prompt_tokens) if job.long_prompt_tokens else 0.0
        computed = job.prompt_tokens * (1.0 - job.prefix_cache_hit_ratio)
        #: share of each busy second the ordinary prompts take, and the time one of them adds to its step
        self.prefill_share = min(0.6, self.request_rate * computed * self.t_prompt)
        self.prompt_seconds = max(computed * self.t_prompt, 1e-6)
        self.long_chunk_seconds = min(job.chunk_tokens, job.long_prompt_tokens) * self.t_long
        step = job.batch / self.decode_rate
        #: the mean step during a burst of long prompts: the decode work plus the long chunks, stretched by the
        #: ordinary prompts' share
        decode_only = step * (1.0 - self.prefill_share)
        self.burst_step = (decode_only + job.long_prompt_step_share * self.long_chunk_seconds) / (
            1 - self.prefill_share
        )

    # -- the state, a pure function of time -------------------------------------------------------------------------
    def busy(self, t: float) -> bool:
        return self.job.busy_at(t - self._started)

    def burst(self, t: float) -> bool:
        return self.job.long_prompts_at(t - self._started)

    def running(self, t: float) -> float:
        if not self.busy(t):
            return 0.0
        return self.job.batch * self.growth(t) * (1.0 + 0.03 * smooth_noise(self._seed, self._stream + 1, t, 45.0))

    def growth(self, t: float) -> float:
        """Running sequences x the batch: up to ``long_prompt_running_growth`` 10 s into a burst of long prompts, and
        back to 1 over the 10 s after it (the extra sequences finish)."""
        extra, elapsed = self.job.long_prompt_running_growth - 1.0, t - self._started
        if extra <= 0:
            return 1.0
        into = self.job.into_burst(elapsed)
        if into is not None:
            return 1.0 + extra * min(1.0, into / 10.0)
        since = self.job.into_burst(elapsed - 10.0)
        if since is None or elapsed < 10.0:
            return 1.0
        ended = elapsed % self.job.long_prompt_every_seconds  # seconds since the burst ended (< 10)
        return 1.0 + extra * max(0.0, 1.0 - ended / 10.0)

    def waiting(self, t: float) -> float:
        if not self.busy(t):
            return 0.0
        return max(0.0, self.job.waiting * (1.0 + 0.3 * smooth_noise(self._seed, self._stream + 2, t, 30.0)))

    def generation_rate(self, t: float) -> float:
        """Tokens generated per second at ``t``: the target's rate, wandering 5 %, slower while long prompts come."""
        if not self.busy(t):
            return 0.0
        wobble = 1.0 + 0.05 * smooth_noise(self._seed, self._stream, t, 60.0)
        if self.burst(t):  # every running sequence gets a token per (longer) step
            return self.running(t) / self.burst_step * wobble
        return self.decode_rate * wobble * self.growth(t)

    def mean_step(self, t: float) -> float | None:
        """Seconds between two tokens of a running sequence at ``t`` (None while idle)."""
        rate = self.generation_rate(t)
        return self.running(t) / rate if rate > 0 else None

    def mean_step_over(self, start: float, end: float) -> float | None:
        steps = [self.mean_step(start + (end - start) * (i + 0.5) / 6) for i in range(6)]
        known = [s for s in steps if s is not None]
        return sum(known) / len(known) if known else None

    # -- one interval --------------------------------------------------------------------------------------------------
    def advance(self, start: float, end: float) -> _Interval:
        job, rng = self.job, self._rng
        dt, t = end - start, (start + end) / 2
        running, waiting = self.running(t), self.waiting(t)
        if not self.busy(t) or dt <= 0:
            return _Interval(self.busy(t), max(0.0, dt), running, waiting, 0.0, 0.0, 0.0, 0.0, 0.0, 0, [], [])
        burst = self.burst(t)
        decode = self.generation_rate(t) * dt
        step = self.mean_step(t) or 0.0
        prompt = decode * job.prompt_tokens / job.output_tokens
        long_share = job.long_prompt_step_share if burst else 0.0
        # Long prompts: their chunks ride `long_share` of the steps.
        long_tokens = (long_share / step) * dt * min(job.chunk_tokens, job.long_prompt_tokens) if step else 0.0
        self._long_carry += long_tokens / job.long_prompt_tokens if job.long_prompt_tokens else 0.0
        whole_long = math.floor(self._long_carry)
        self._long_carry -= whole_long
        self._long_pending += whole_long
        # Preemptions: each frees a sequence's blocks; it resumes by recomputing its context.
        self._preempt_carry += job.preemptions_per_second * dt
        preemptions = math.floor(self._preempt_carry)
        self._preempt_carry -= preemptions
        # Steps: a decode-only step, or one that carries a prompt (or a long prompt's chunk) too.
        decode_only = step * (1.0 - self.prefill_share) - long_share * self.long_chunk_seconds
        p_prompt = min(1.0, self.prefill_share * step / self.prompt_seconds)
        prompt_seconds = self.prefill_share * step / p_prompt if p_prompt else 0.0
        sequences = max(1, round(running))
        self._step_carry += decode / sequences
        whole_steps = math.floor(self._step_carry)
        self._step_carry -= whole_steps
        steps = []
        for _ in range(whole_steps):
            u, seconds = rng.random(), decode_only
            if u < long_share:
                seconds += self.long_chunk_seconds
            elif u < long_share + p_prompt:
                seconds += prompt_seconds
            steps.append((max(1e-4, seconds * (1.0 + 0.05 * rng.gauss(0.0, 1.0))), sequences))
        # Finished requests.
        self._unfinished += decode / job.output_tokens
        count = math.floor(self._unfinished)
        self._unfinished -= count
        contention = long_share * self.long_chunk_seconds  # a prompt's step may carry a long prompt's chunk too
        finished = [self._request(end, step, decode_only, contention, waiting, preemptions) for _ in range(count)]
        computed = prompt * (1.0 - job.prefix_cache_hit_ratio) + long_tokens
        recomputed = preemptions * job.context_tokens
        return _Interval(
            True, dt, running, waiting, decode, prompt + long_tokens, computed, long_tokens, recomputed, preemptions,
            steps, finished,
        )  # fmt: skip

    def _request(
        self, now: float, step: float, decode_only: float, contention: float, waiting: float, preemptions: int
    ) -> _Request:
        job, rng = self.job, self._rng
        is_long = self._long_pending > 0 and rng.random() < 0.5
        if is_long:
            self._long_pending -= 1
        prompt = job.long_prompt_tokens if is_long else job.prompt_tokens
        per_token = self.t_long if is_long else self.t_prompt
        computed = prompt if is_long else prompt * (1.0 - job.prefix_cache_hit_ratio)
        chunks = max(1, math.ceil(computed / job.chunk_tokens))
        # Little's law: requests waiting / requests per second; a fraction of a step when nothing waits.
        wait = round(waiting) / self.request_rate  # the queue the engine shows
        queue = wait * rng.gammavariate(6.0, 1 / 6) if wait > 0 else step * rng.random()
        prefill = chunks * (max(decode_only, 0.0) + (0.0 if is_long else contention)) + computed * per_token
        generated = job.output_tokens - 1
        mean = self.mean_step_over(now - generated * step, now) or step
        decode = generated * mean * max(0.5, 1.0 + 0.06 * rng.gauss(0.0, 1.0))
        preempted = 0
        if preemptions and rng.random() < min(0.9, job.preemptions_per_second / self.request_rate):
            preempted = 1
            # Back in the queue, then its prompt and the output so far computed again.
            recompute = (prompt + generated / 2) * self.t_prompt
            decode += max(wait, step) * rng.gammavariate(6.0, 1 / 6) + recompute
        reason = "length" if rng.random() < 0.12 else "stop"
        return _Request(prompt, job.output_tokens, queue, prefill, decode, preempted, reason)


class SimulatedEngine:
    """One engine: counters advanced to the wall clock on every scrape, served on
    ``http://127.0.0.1:<port>/metrics``."""

    def __init__(self, job: SimServingJob, seed: int = 0, clock: Callable[[], float] = time.time) -> None:
        if job.engine not in ("vllm", "sglang", "tgi"):
            raise ValueError(f"engine must be vllm, sglang or tgi, got {job.engine!r}")
        self.job = job
        self._clock = clock
        self._lock = threading.Lock()
        self._last = self.started = clock()
        self._model = _LatencyModel(job, seed, self.started)
        self.registry = CollectorRegistry()
        self._engine: _VllmEngine | _SglangEngine | _TgiEngine
        if job.engine == "vllm":
            self._engine = _VllmEngine(self.registry, job)
        elif job.engine == "sglang":
            self._engine = _SglangEngine(job)
            self.registry.register(self._engine)
        else:
            self._engine = _TgiEngine(job)
            self.registry.register(self._engine)
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the engine first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/metrics"

    def busy(self, now: float | None = None) -> bool:
        """Whether the engine has requests at ``now`` (the wall clock by default): False in an idle stretch."""
        return self._model.busy(self._clock() if now is None else now)

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
        """Move the engine to ``now`` in stretches of a second at most (the state changes between them)."""
        start = self._last
        if now <= start:
            return
        pieces = min(3600, math.ceil(now - start))
        for i in range(pieces):
            end = now if i == pieces - 1 else start + (now - start) * (i + 1) / pieces
            self._engine.apply(self._model.advance(self._last, end))
            self._last = end


class _VllmEngine:
    """vLLM V1's series in a ``prometheus_client`` registry, as its ``PrometheusStatLogger`` declares them."""

    def __init__(self, registry: CollectorRegistry, job: SimServingJob) -> None:
        self.job = job
        labels = ["model_name", "engine"]
        values = (job.served_model, "0")

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, labels, registry=registry).labels(*values)

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, labels, registry=registry).labels(*values)

        def histogram(name: str, doc: str, buckets: Any) -> Any:
            return Histogram(name, doc, labels, buckets=buckets, registry=registry).labels(*values)

        capacity_tokens = job.batch * job.context_tokens / job.kv_cache_usage
        cache = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            ["block_size", "cache_dtype", "num_gpu_blocks", "engine"],
            registry=registry,
        )
        cache.labels(str(_BLOCK_SIZE), "auto", str(math.ceil(capacity_tokens / _BLOCK_SIZE)), "0").set(1)
        lengths = _build_1_2_5_buckets(job.max_model_len)
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*labels, "finished_reason"],
            registry=registry,
        )
        self.success = {reason: success.labels(*values, reason) for reason in ("stop", "length", "abort", "error")}
        self.request_prompt = histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", lengths)
        self.request_generation = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", lengths
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", VLLM_TTFT_BUCKETS
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", VLLM_TPOT_BUCKETS
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            VLLM_TPOT_BUCKETS,
        )
        latency = VLLM_REQUEST_LATENCY_BUCKETS
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", latency
        )
        self.queue = histogram(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", latency
        )
        self.inference = histogram(
            "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", latency
        )
        self.prefill = histogram(
            "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", latency
        )
        self.decode = histogram(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", latency
        )
        self.engine_flops = counter(
            "vllm:estimated_flops_per_gpu", "Estimated number of floating point operations per GPU"
        )
        self.engine_read = counter(
            "vllm:estimated_read_bytes_per_gpu", "Estimated number of bytes read from memory per GPU"
        )
        self.engine_write = counter(
            "vllm:estimated_write_bytes_per_gpu", "Estimated number of bytes written to memory per GPU"
        )

    def apply(self, done: _Interval) -> None:
        job = self.job
        self.running.set(round(done.running))
        self.waiting.set(round(done.waiting))
        self.kv.set(min(1.0, job.kv_cache_usage * done.running / job.batch))
        if not done.busy:
            return
        normal = done.prompt_tokens - done.long_prompt_tokens
        self.prompt.inc(done.prompt_tokens)
        self.hits.inc(normal * job.prefix_cache_hit_ratio)
        self.queries.inc(done.prompt_tokens)
        self.generation.inc(done.decode_tokens)
        self.preemptions.inc(done.preemptions)
        for seconds, sequences in done.steps:
            for _ in range(sequences):
                self.itl.observe(seconds)
        for request in done.finished:
            self.request_prompt.observe(request.prompt_tokens)
            self.request_generation.observe(request.output_tokens)
            self.success[request.finished_reason].inc()
            self.ttft.observe(request.ttft)
            self.tpot.observe(request.tpot)
            self.e2e.observe(request.e2e)
            self.queue.observe(request.queue)
            self.inference.observe(request.inference)
            self.prefill.observe(request.prefill)
            self.decode.observe(request.decode)
        # The engine's convention: 2N per token plus attention over each token's whole context (no causal half); it
        # counts scheduled tokens, so no cache hits and every recomputed one.
        attention = 4 * job.layers * job.heads * job.head_dim
        long_context = job.long_prompt_tokens or job.prompt_tokens
        flops = (done.computed_prompt_tokens - done.long_prompt_tokens) * (
            2 * job.params + attention * job.prompt_tokens
        )
        flops += done.long_prompt_tokens * (2 * job.params + attention * long_context)
        flops += done.recomputed_tokens * (2 * job.params + attention * job.context_tokens)
        flops += done.decode_tokens * (2 * job.params + attention * job.context_tokens)
        self.engine_flops.inc(flops / job.num_gpus)
        steps = done.decode_tokens / job.batch  # one weight read per decode step, split over the GPUs
        self.engine_read.inc(steps * 2 * job.params / job.num_gpus)
        self.engine_write.inc(done.decode_tokens * 2 * job.layers * job.kv_heads * job.head_dim * 2 / job.num_gpus)


class _Hist:
    """A cumulative histogram kept by hand (SGLang's multiprocess registry and TGI's Rust recorder print no
    ``*_created``; SGLang itself adds a count to a bucket at once for inter-token latency)."""

    def __init__(self, bounds: tuple[float, ...], format_bound: Callable[[float], str]) -> None:
        self.bounds = bounds
        self.labels = tuple(format_bound(b) for b in bounds)
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += count
        self.sum += value * count

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        total = 0
        for label, count in zip((*self.labels, "+Inf"), self.counts, strict=True):
            total += count
            out.append((label, total))
        return out

    def family(self, name: str, doc: str, labels: Mapping[str, str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=list(labels))
        family.add_metric(list(labels.values()), self.buckets(), self.sum)
        return family


class _SglangEngine:
    """SGLang 0.5's series: scheduler-side (rank labels) and tokenizer-side (``model_name`` only)."""

    def __init__(self, job: SimServingJob) -> None:
        self.job = job
        self.tokenizer_labels = {"model_name": job.served_model}
        self.scheduler_labels = {
            "engine_type": "unified",
            "model_name": job.served_model,
            "moe_ep_rank": "0",
            "pp_rank": "0",
            "tp_rank": "0",
        }
        self.capacity = round(job.batch * job.context_tokens / job.kv_cache_usage)
        self.counters: dict[str, float] = dict.fromkeys(
            (
                "prompt",
                "generation",
                "cached",
                "requests",
                "aborted",
                "prefill_compute",
                "prefill_cache",
                "decode",
                "retracted",
                "retracted_input",
                "retracted_output",
            ),
            0.0,
        )
        self.gauges: dict[str, float] = {}
        self.ttft = _Hist(SGLANG_TTFT_BUCKETS, floatToGoString)
        self.itl = _Hist(SGLANG_ITL_BUCKETS, floatToGoString)
        self.e2e = _Hist(SGLANG_E2E_BUCKETS, floatToGoString)
        self.queue = _Hist(SGLANG_QUEUE_BUCKETS, floatToGoString)
        self.retractions = _Hist(tuple(float(b) for b in SGLANG_RETRACTION_BUCKETS), floatToGoString)
        self._apply_gauges(_Interval(True, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, [], []))

    def _apply_gauges(self, done: _Interval) -> None:
        job, running = self.job, round(done.running)
        usage = min(1.0, job.kv_cache_usage * done.running / job.batch)
        self.gauges = {
            "num_running_reqs": running,
            "num_queue_reqs": round(done.waiting),
            "token_usage": usage,
            "num_used_tokens": round(usage * self.capacity),
            "max_total_num_tokens": self.capacity,
            "decode_sum_seq_lens": round(running * job.context_tokens),
            "gen_throughput": done.decode_tokens / done.seconds if done.seconds > 0 else 0.0,
            "cache_hit_rate": job.prefix_cache_hit_ratio if done.busy else 0.0,
            "num_retracted_reqs": done.preemptions,
        }

    def apply(self, done: _Interval) -> None:
        job, c = self.job, self.counters
        self._apply_gauges(done)
        c["prefill_compute"] += done.computed_prompt_tokens
        c["prefill_cache"] += done.prompt_tokens - done.computed_prompt_tokens
        c["decode"] += done.decode_tokens
        c["retracted"] += done.preemptions
        c["retracted_input"] += done.preemptions * job.prompt_tokens
        c["retracted_output"] += done.preemptions * job.output_tokens / 2
        for latency, sequences in done.steps:
            self.itl.observe(latency, sequences)
        for request in done.finished:
            cached = (
                0.0
                if request.prompt_tokens != job.prompt_tokens
                else request.prompt_tokens * job.prefix_cache_hit_ratio
            )
            c["prompt"] += request.prompt_tokens
            c["generation"] += request.output_tokens
            c["cached"] += cached
            c["requests"] += 1
            self.ttft.observe(request.ttft)
            self.e2e.observe(request.e2e)
            self.queue.observe(request.queue)
            self.retractions.observe(float(request.preemptions))

    def collect(self) -> Iterator[Metric]:
        tok, sched, c = self.tokenizer_labels, self.scheduler_labels, self.counters

        def counter(name: str, doc: str, value: float, labels: Mapping[str, str]) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=list(labels))
            family.add_metric(list(labels.values()), value)
            return family

        realtime = CounterMetricFamily(
            "sglang:realtime_tokens_total",
            "Total number of tokens processed (updated on each log interval). "
            "mode: prefill_compute, prefill_cache, decode.",
            labels=[*sched, "mode"],
        )
        for mode in ("prefill_compute", "prefill_cache", "decode"):
            realtime.add_metric([*sched.values(), mode], c[mode])
        yield realtime
        yield counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", c["prompt"], tok)
        yield counter("sglang:generation_tokens_total", "Number of generation tokens processed.", c["generation"], tok)
        yield counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", c["cached"], tok)
        yield counter("sglang:num_requests_total", "Number of requests processed.", c["requests"], tok)
        yield counter("sglang:num_aborted_requests_total", "Number of requests aborted.", c["aborted"], tok)
        yield counter(
            "sglang:num_retracted_requests_total", "Total number of retracted requests.", c["retracted"], sched
        )
        yield counter(
            "sglang:num_retracted_input_tokens_total",
            "Total number of retracted input tokens.",
            c["retracted_input"],
            sched,
        )
        yield counter(
            "sglang:num_retracted_output_tokens_total",
            "Total number of retracted output tokens.",
            c["retracted_output"],
            sched,
        )
        yield self.ttft.family(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", tok
        )
        yield self.itl.family("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tok)
        yield self.e2e.family(
            "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", tok
        )
        yield self.retractions.family("sglang:num_retractions", "Histogram of retraction counts per request.", tok)
        yield self.queue.family("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sched)
        docs = {
            "num_running_reqs": "The number of running requests.",
            "num_used_tokens": "The number of used tokens.",
            "token_usage": "The token usage.",
            "decode_sum_seq_lens": "The sum of all sequence lengths in decode.",
            "gen_throughput": "The generation throughput (token/s).",
            "num_queue_reqs": "The number of requests in the waiting queue.",
            "cache_hit_rate": "The prefix cache hit rate.",
            "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
            "num_retracted_reqs": "The number of retracted requests.",
        }
        for key, doc in docs.items():
            gauge = GaugeMetricFamily(f"sglang:{key}", doc, labels=list(sched))
            gauge.add_metric(list(sched.values()), self.gauges[key])
            yield gauge


class _TgiEngine:
    """TGI's series, advanced by whole requests as TGI's per-request histograms are (a request's prompt counts when
    it arrives, its output when it ends); the time its prompt took follows the target active prefill MFU."""

    def __init__(self, job: SimServingJob) -> None:
        self.job = job
        self.requests = self.input_tokens = self.generated_tokens = 0.0
        self.prefill_calls = self.decode_calls = self.prefill_seconds = self.decode_seconds = 0.0
        self.batch = self.queue_size = 0.0
        self.max_total_tokens = round(job.batch * (job.prompt_tokens + job.output_tokens) / job.kv_cache_usage)
        rust = repr  # Rust's Display of an f64: the shortest text that reads back the same (no exponent here)
        self.queue = _Hist(TGI_DURATION_BUCKETS, rust)
        self.inference = _Hist(TGI_DURATION_BUCKETS, rust)
        self.validation = _Hist(TGI_DURATION_BUCKETS, rust)
        self.duration = _Hist(TGI_DURATION_BUCKETS, rust)
        self.time_per_token = _Hist(TGI_DURATION_BUCKETS, rust)
        self._rng = random.Random(f"tgi/{job.job_id}")

    def apply(self, done: _Interval) -> None:
        job = self.job
        finished = len(done.finished)
        prompt_flops = job.prompt_tokens * job.prompt_flops_per_token()
        prefill_seconds = finished * prompt_flops / (job.prefill_active_mfu * job.num_gpus * job.peak_flops_per_gpu)
        dt = done.seconds if done.busy else 0.0
        self.requests += finished
        self.input_tokens += finished * job.prompt_tokens
        self.generated_tokens += finished * job.output_tokens
        self.prefill_calls += finished
        self.decode_calls += done.decode_tokens / job.batch
        self.prefill_seconds += prefill_seconds
        self.decode_seconds += max(0.0, dt - prefill_seconds)
        self.batch, self.queue_size = round(done.running), round(done.waiting)
        for request in done.finished:
            validation = 0.0005 + 0.0015 * self._rng.random()
            self.validation.observe(validation)
            self.queue.observe(request.queue)
            self.inference.observe(request.inference)
            self.time_per_token.observe(request.inference / request.output_tokens)
            self.duration.observe(validation + request.queue + request.inference)

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "tgi_batch_inference_count", "Inference calls per method (prefill or decode)", labels=["method"]
        )
        calls.add_metric(["prefill"], math.floor(self.prefill_calls))
        calls.add_metric(["decode"], math.floor(self.decode_calls))
        yield calls
        count = math.floor(self.requests)
        yield CounterMetricFamily("tgi_request_success", "Number of successful requests", value=count)
        yield CounterMetricFamily("tgi_request_count", "Total number of requests", value=count)
        yield GaugeMetricFamily("tgi_batch_current_size", "Current batch size", value=self.batch)
        yield GaugeMetricFamily("tgi_queue_size", "Current queue size", value=self.queue_size)
        current = self.job.kv_cache_usage * self.max_total_tokens * (1.0 if self.batch else 0.0)
        yield GaugeMetricFamily("tgi_batch_current_max_tokens", "Maximum tokens for the current batch", value=current)
        yield GaugeMetricFamily("tgi_batch_max_total_tokens", "", value=self.max_total_tokens)
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
        for hist, name, doc in (
            (self.duration, "tgi_request_duration", "Request duration"),
            (self.validation, "tgi_request_validation_duration", "Request validation duration"),
            (self.queue, "tgi_request_queue_duration", "Request queue duration"),
            (self.inference, "tgi_request_inference_duration", "Request inference duration"),
            (self.time_per_token, "tgi_request_mean_time_per_token_duration", "Mean time per token per request"),
        ):
            yield hist.family(name, doc, {})
