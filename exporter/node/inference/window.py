"""Two readings of an engine -> what it did in between: prefill and decode tokens, batch, context, queue.

Counters are cumulative, so the interval is their increase. An engine restart resets them: a counter that went down,
a new ``process_start_time_seconds`` or a new ``*_created`` timestamp all mean the engine started again, and the
increase is then the new value (tokens counted before the restart and after the previous scrape are lost, as with
Prometheus' ``increase()``). A counter seen for the first time gives no increase unless the engine restarted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.node.inference.engines import EngineReading

__all__ = ["ServingInterval", "serving_interval"]


@dataclass(frozen=True)
class ServingInterval:
    """What the engine did between two scrapes, as the job report's inference fields (None: unknown)."""

    interval_seconds: float
    prefill_tokens: int
    decode_tokens: int
    restarted: bool = False
    batch_size: float | None = None
    context_tokens: float | None = None
    mean_prompt_tokens: float | None = None
    prefill_busy_seconds: float | None = None
    decode_busy_seconds: float | None = None
    requests_running: int | None = None
    requests_waiting: int | None = None
    kv_cache_usage: float | None = None

    def report_fields(self) -> dict[str, Any]:
        """The fields of ``POST /v1/jobs/{id}/reports`` this interval fills (unknown ones left out)."""
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
        }
        return {key: value for key, value in fields.items() if value is not None}


def restarted_between(previous: EngineReading, current: EngineReading) -> bool:
    """True when the engine process started again between the two readings."""
    if previous.started_at is not None and current.started_at is not None and current.started_at != previous.started_at:
        return True
    if any(current.created.get(key) not in (None, stamp) for key, stamp in previous.created.items()):
        return True
    return any(current.counters.get(key, value) < value for key, value in previous.counters.items())


def increase(previous: EngineReading, current: EngineReading, key: str, restarted: bool) -> float | None:
    """How much counter ``key`` grew; after a restart, its whole new value."""
    now = current.counters.get(key)
    if now is None:
        return None
    before = previous.counters.get(key)
    if restarted:
        return now
    if before is None:
        return None
    return now - before


def serving_interval(previous: EngineReading, current: EngineReading, interval_seconds: float) -> ServingInterval:
    """The interval between two readings of one engine; ``interval_seconds`` is the time between the scrapes."""
    restarted = restarted_between(previous, current)

    def grew(key: str) -> float | None:
        return increase(previous, current, key, restarted)

    decode = grew("generation_tokens") or 0.0
    gauges = current.gauges
    running = gauges.get("requests_running")
    waiting = gauges.get("requests_waiting")
    return ServingInterval(
        interval_seconds=interval_seconds,
        prefill_tokens=round(_computed_prompt_tokens(grew)),
        decode_tokens=round(decode),
        restarted=restarted,
        batch_size=_batch_size(previous, current, grew("decode_steps"), decode),
        context_tokens=_context_tokens(current, grew),
        mean_prompt_tokens=_mean(grew("finished_prompt_tokens"), grew("finished_prompt_requests")),
        prefill_busy_seconds=grew("prefill_busy_seconds"),
        decode_busy_seconds=grew("decode_busy_seconds"),
        requests_running=None if running is None else round(running),
        requests_waiting=None if waiting is None else round(waiting),
        kv_cache_usage=None if gauges.get("kv_cache_usage") is None else min(1.0, max(0.0, gauges["kv_cache_usage"])),
    )


def _computed_prompt_tokens(grew: Any) -> float:
    """Prompt tokens the engine computed: prefix-cache hits cost no FLOPs (and would push prefill MFU past 1)."""
    computed = grew("computed_prompt_tokens")
    if computed is not None:
        return float(computed)
    prompt = grew("prompt_tokens") or 0.0
    cached = grew("cached_prompt_tokens") or 0.0
    return float(max(0.0, prompt - cached))


def _batch_size(previous: EngineReading, current: EngineReading, steps: float | None, decode: float) -> float | None:
    """Mean sequences per decode step of one replica: decode tokens / steps (TGI), else the running requests."""
    if steps and decode:
        return decode / steps
    running = [r.gauges["requests_running"] for r in (previous, current) if "requests_running" in r.gauges]
    if not running or not sum(running):
        return None
    return sum(running) / len(running) / max(1, current.replicas)


def _context_tokens(current: EngineReading, grew: Any) -> float | None:
    """Mean context of a sequence being decoded: the engine's own sum (SGLang), the KV cache in use (vLLM),
    else the mean finished request's prompt plus half its output (where decoding is, on average).

    TGI's usage is a reservation (prompt + max new tokens of each request), not the tokens cached: not used here.
    """
    gauges = current.gauges
    running = gauges.get("requests_running") or 0
    if running > 0 and gauges.get("decode_context_tokens"):
        return gauges["decode_context_tokens"] / running
    reserved = "kv_tokens_reserved" in gauges
    if running > 0 and not reserved and gauges.get("kv_tokens_capacity") and gauges.get("kv_cache_usage"):
        return gauges["kv_cache_usage"] * gauges["kv_tokens_capacity"] / running
    prompt = _mean(grew("finished_prompt_tokens"), grew("finished_prompt_requests"))
    output = _mean(grew("finished_generation_tokens"), grew("finished_generation_requests"))
    if prompt is None or output is None:
        return None
    return prompt + output / 2


def _mean(total: float | None, count: float | None) -> float | None:
    if total is None or not count or total <= 0:
        return None
    return total / count
