"""Two readings of an engine -> what it did in between: prefill and decode tokens, batch, context, queue.

Counters are cumulative, so the interval is their increase. An engine restart resets them: a counter that went down,
a new ``process_start_time_seconds`` or a new ``*_created`` timestamp all mean the engine started again, and the
increase is then the new value (tokens counted before the restart and after the previous scrape are lost, as with
Prometheus' ``increase()``). A counter seen for the first time counts from zero: engines create series lazily (TGI
prints a counter only once it was first incremented, a labelled child appears with its first label value), so all of
it happened since the previous scrape. A counter whose source changed between the scrapes (SGLang prints
``realtime_tokens_total{mode="decode"}`` only after its first log interval, until then its
``generation_tokens_total`` stands in) gives no increase for that interval: the two count differently.

The latency histograms (time to first token, time per output token, inter-token latency, queue time: engines.py says
which family each is and why) follow the same rules, edge by edge (histograms.py): their increase over the interval,
all of the new value after a restart, none when the family or its edges changed. A histogram's count that fell is a
restart too. Preemptions and the requests' running time are counters like the tokens.

The engine's own FLOPs and bytes estimate (``--enable-mfu-metrics``) is rated the same way and sent as the mean GPU's
increase over the interval (summed over replicas, divided by them). It is left out where it cannot be trusted: a
counter that did not grow while tokens were made means the engine could not build its estimator for this model
(vLLM keeps the counters at 0 then), not that the GPUs did no work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mfumon.exporter.node.inference.engines import EngineReading
from mfumon.exporter.node.inference.histograms import LatencyHistogram

__all__ = [
    "COUNTS_AT_COMPLETION",
    "MAX_COMPLETION_WAIT_S",
    "ServingInterval",
    "histogram_increase",
    "serving_interval",
]

#: Engines whose token counters grow only when a request finishes (TGI: the sums of its per-request histograms).
#: Between two scrapes in which none finished, their tokens are unknown, not zero.
COUNTS_AT_COMPLETION = frozenset({"tgi"})
#: How long such an engine's interval may stretch while waiting for a request to finish before it is reported anyway.
MAX_COMPLETION_WAIT_S = 300.0


@dataclass(frozen=True)
class ServingInterval:
    """What the engine did between two scrapes, as the job report's inference fields (None: unknown)."""

    interval_seconds: float
    prefill_tokens: int
    decode_tokens: int
    restarted: bool = False
    requests_finished: int | None = None
    batch_size: float | None = None
    context_tokens: float | None = None
    mean_prompt_tokens: float | None = None
    prefill_busy_seconds: float | None = None
    decode_busy_seconds: float | None = None
    requests_running: int | None = None
    requests_waiting: int | None = None
    kv_cache_usage: float | None = None
    engine_flops_per_gpu: float | None = None
    engine_bytes_per_gpu: float | None = None
    engine_estimator: str | None = None  # the engine whose estimate engine_* are (its FLOPs convention)
    engine: str | None = None  # the engine read: vllm, sglang or tgi
    preemptions: int | None = None
    request_running_seconds: float | None = None  # summed over the requests that finished in the interval
    ttft_histogram: LatencyHistogram | None = None
    tpot_histogram: LatencyHistogram | None = None
    itl_histogram: LatencyHistogram | None = None
    queue_histogram: LatencyHistogram | None = None

    def report_fields(self) -> dict[str, Any]:
        """The fields of ``POST /v1/jobs/{id}/reports`` this interval fills (unknown ones left out)."""
        histograms = {
            "ttft_histogram": self.ttft_histogram,
            "tpot_histogram": self.tpot_histogram,
            "itl_histogram": self.itl_histogram,
            "queue_histogram": self.queue_histogram,
        }
        fields = {
            "interval_seconds": self.interval_seconds,
            "prefill_tokens": self.prefill_tokens,
            "decode_tokens": self.decode_tokens,
            "batch_size": self.batch_size,
            "context_tokens": self.context_tokens,
            "mean_prompt_tokens": self.mean_prompt_tokens,
            "prefill_busy_seconds": self.prefill_busy_seconds,
            "decode_busy_seconds": self.decode_busy_seconds,
            "requests_running": self.requests_running,
            "requests_waiting": self.requests_waiting,
            "kv_cache_usage": self.kv_cache_usage,
            "engine_flops_per_gpu": self.engine_flops_per_gpu,
            "engine_bytes_per_gpu": self.engine_bytes_per_gpu,
            "engine_estimator": self.engine_estimator,
            "engine": self.engine,
            "requests_finished": self.requests_finished,
            "preemptions": self.preemptions,
            "request_running_seconds": self.request_running_seconds,
            **{name: None if histogram is None else histogram.as_json() for name, histogram in histograms.items()},
        }
        return {key: value for key, value in fields.items() if value is not None}

    def awaiting_completion(self, engine: str) -> bool:
        """True while ``engine`` counts tokens at completion and requests ran but none finished in this interval.

        Reporting such an interval would say "0 tokens" for a full batch; waiting for the next completion (up to
        :data:`MAX_COMPLETION_WAIT_S`) reports the tokens over the whole stretch instead.
        """
        return (
            engine in COUNTS_AT_COMPLETION
            and not self.restarted
            and self.requests_finished == 0
            and (self.requests_running or 0) > 0
            and self.interval_seconds < MAX_COMPLETION_WAIT_S
        )


def restarted_between(previous: EngineReading, current: EngineReading) -> bool:
    """True when the engine process started again between the two readings."""
    if previous.started_at is not None and current.started_at is not None and current.started_at != previous.started_at:
        return True
    if any(
        current.created.get(key) not in (None, stamp) and _same_source(previous, current, key)
        for key, stamp in previous.created.items()
    ):
        return True
    if any(
        current.histograms[key].count < histogram.count
        for key, histogram in previous.histograms.items()
        if key in current.histograms and _same_source(previous, current, key)
    ):
        return True
    return any(
        current.counters.get(key, value) < value
        for key, value in previous.counters.items()
        if _same_source(previous, current, key)
    )


def increase(previous: EngineReading, current: EngineReading, key: str, restarted: bool) -> float | None:
    """How much counter ``key`` grew; after a restart, its whole new value."""
    now = current.counters.get(key)
    if now is None:
        return None
    if restarted:
        return now
    if not _same_source(previous, current, key):
        return None
    return now - previous.counters.get(key, 0.0)


def histogram_increase(
    previous: EngineReading, current: EngineReading, key: str, restarted: bool
) -> LatencyHistogram | None:
    """What histogram ``key`` counted in the interval (see :meth:`LatencyHistogram.increase`); None when the engine
    does not export it, or it was read from another family at the earlier scrape."""
    now = current.histograms.get(key)
    if now is None:
        return None
    if not restarted and not _same_source(previous, current, key):
        return None
    return now.increase(previous.histograms.get(key), restarted)


def _same_source(previous: EngineReading, current: EngineReading, key: str) -> bool:
    before, after = previous.sources.get(key), current.sources.get(key)
    return before is None or after is None or before == after


def serving_interval(previous: EngineReading, current: EngineReading, interval_seconds: float) -> ServingInterval:
    """The interval between two readings of one engine; ``interval_seconds`` is the time between the scrapes."""
    restarted = restarted_between(previous, current)

    def grew(key: str) -> float | None:
        return increase(previous, current, key, restarted)

    def counted(key: str) -> LatencyHistogram | None:
        return histogram_increase(previous, current, key, restarted)

    decode = grew("generation_tokens") or 0.0
    prefill = _computed_prompt_tokens(grew)
    made_tokens = decode + prefill > 0
    read, written = grew("engine_read_bytes_per_gpu"), grew("engine_write_bytes_per_gpu")
    engine_flops = _per_gpu(grew("engine_flops_per_gpu"), current.replicas, made_tokens)
    engine_bytes = _per_gpu(None if read is None or written is None else read + written, current.replicas, made_tokens)
    gauges = current.gauges
    running = gauges.get("requests_running")
    waiting = gauges.get("requests_waiting")
    return ServingInterval(
        interval_seconds=interval_seconds,
        prefill_tokens=round(prefill),
        decode_tokens=round(decode),
        restarted=restarted,
        requests_finished=None if (finished := grew("finished_generation_requests")) is None else round(finished),
        batch_size=_batch_size(previous, current, grew, decode),
        context_tokens=_context_tokens(current, grew),
        mean_prompt_tokens=_mean(grew("finished_prompt_tokens"), grew("finished_prompt_requests")),
        prefill_busy_seconds=grew("prefill_busy_seconds"),
        decode_busy_seconds=grew("decode_busy_seconds"),
        requests_running=None if running is None else round(running),
        requests_waiting=None if waiting is None else round(waiting),
        kv_cache_usage=None if gauges.get("kv_cache_usage") is None else min(1.0, max(0.0, gauges["kv_cache_usage"])),
        engine_flops_per_gpu=engine_flops,
        engine_bytes_per_gpu=engine_bytes,
        engine_estimator=None if engine_flops is None and engine_bytes is None else current.engine,
        engine=current.engine,
        preemptions=None if (preempted := grew("preemptions")) is None else round(preempted),
        request_running_seconds=grew("request_running_seconds"),
        ttft_histogram=counted("ttft"),
        tpot_histogram=counted("tpot"),
        itl_histogram=counted("itl"),
        queue_histogram=counted("queue"),
    )


def _per_gpu(total: float | None, replicas: int, made_tokens: bool) -> float | None:
    """The mean GPU's share of an engine estimate summed over replicas; None when unknown or not running.

    A counter that stayed put while tokens were made is an estimator that never ran (vLLM leaves it at 0 when it
    cannot parse the model's config), so its 0 is not sent as a figure.
    """
    if total is None or total < 0 or (total == 0 and made_tokens):
        return None
    return total / max(1, replicas)


def _computed_prompt_tokens(grew: Any) -> float:
    """Prompt tokens the engine computed: prefix-cache hits cost no FLOPs (and would push prefill MFU past 1)."""
    computed = grew("computed_prompt_tokens")
    if computed is not None:
        return float(computed)
    prompt = grew("prompt_tokens") or 0.0
    cached = grew("cached_prompt_tokens") or 0.0
    return float(max(0.0, prompt - cached))


def _batch_size(previous: EngineReading, current: EngineReading, grew: Any, decode: float) -> float | None:
    """Mean sequences per decode step of one replica: tokens made by decode steps / steps (TGI), else the running
    requests. A TGI request's first token comes out of its prefill, not a decode step, so finished requests' first
    tokens are taken off (with 30-token answers, 3% of the count)."""
    steps = grew("decode_steps")
    if steps and decode:
        first_tokens = grew("finished_generation_requests") or 0.0
        return max(0.0, decode - first_tokens) / steps
    running = [r.gauges["requests_running"] for r in (previous, current) if "requests_running" in r.gauges]
    if not running or not sum(running):
        return None
    return sum(running) / len(running) / max(1, current.replicas)


def _context_tokens(current: EngineReading, grew: Any) -> float | None:
    """Mean context of a sequence being decoded: the engine's own sum (SGLang 0.5), the KV tokens in use (SGLang
    ``num_used_tokens``, vLLM usage x capacity), else the mean finished request's prompt plus half its output
    (where decoding is, on average).

    TGI's usage is a reservation (prompt + max new tokens of each request), not the tokens cached: not used here.
    """
    gauges = current.gauges
    running = gauges.get("requests_running") or 0
    if running > 0 and gauges.get("decode_context_tokens"):
        return gauges["decode_context_tokens"] / running
    if running > 0 and gauges.get("kv_tokens_used"):
        return gauges["kv_tokens_used"] / running
    prompt = _mean(grew("finished_prompt_tokens"), grew("finished_prompt_requests"))
    output = _mean(grew("finished_generation_tokens"), grew("finished_generation_requests"))
    if prompt is None or output is None:
        return None
    return prompt + output / 2


def _mean(total: float | None, count: float | None) -> float | None:
    if total is None or not count or total <= 0:
        return None
    return total / count
