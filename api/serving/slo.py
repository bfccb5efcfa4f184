"""SLO goodput: the share (and rate) of requests served within both their time-to-first-token and time-per-output-
token targets (DistServe, OSDI 2024), from the engines' latency histograms.

The engines count TTFT and TPOT in two separate histograms, so what they give is each target's share on its own (as
bounds, :mod:`mfumon.api.serving.histograms`), not which requests met both. The share meeting both lies between the
Fréchet bounds of the two: at least ``ttft + tpot - 1`` (every miss a different request) and at most the smaller of
the two (every miss of one target also a miss of the other). The lower bound is the figure reported
(``slo_goodput_ratio``: "at least this share met both"), the upper beside it; the alert fires only when the upper
bound is below the objective, that is when the shortfall is certain. The gap between them is the smaller of the two
miss shares (plus any bucket straddling a target): 0 when one target is always met.

The two histograms count different populations over an interval: TTFT the requests whose first token came in it,
TPOT those that finished in it. Over the window (several intervals, :data:`WINDOW_SECONDS`) both are the same
requests but for those in flight at its two ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from mfumon.api.core.config import Settings
from mfumon.api.serving.histograms import WithinTarget

__all__ = ["WINDOW_SECONDS", "Goodput", "SloCounts", "Targets", "goodput", "resolve_targets"]

#: Reports within this many seconds of the newest make up the goodput window (a 5-minute rate, as dashboards use).
WINDOW_SECONDS = 300.0

METHOD = (
    "share of requests within each target from the engine's histograms (exact at a bucket edge, else bounded by the "
    "bucket around the target); both targets: between max(0, ttft + tpot - 1) and min(ttft, tpot) (Fréchet), "
    "reported as the lower bound; summed over the reports of the last 300 s"
)
TargetSource = Literal["job", "pool", "default"]


@dataclass(frozen=True, slots=True)
class Targets:
    """The targets a serving job is held to, and where each came from."""

    ttft_seconds: float
    tpot_seconds: float
    objective_ratio: float
    source: dict[str, TargetSource]

    def as_json(self) -> dict[str, object]:
        return {
            "ttft_seconds": self.ttft_seconds,
            "tpot_seconds": self.tpot_seconds,
            "objective_ratio": self.objective_ratio,
            "source": dict(self.source),
        }


def resolve_targets(job_slo: dict[str, float] | None, pool: str | None, settings: Settings) -> Targets:
    """The job's own targets, else its pool's (``MFUMON_SLO_POOLS``), else the defaults, target by target."""
    own = job_slo or {}
    pooled = settings.SLO_POOLS.get(pool) if pool else None
    defaults = {
        "ttft_seconds": settings.SLO_TTFT_SECONDS,
        "tpot_seconds": settings.SLO_TPOT_SECONDS,
        "objective_ratio": settings.SLO_OBJECTIVE_RATIO,
    }
    values: dict[str, float] = {}
    source: dict[str, TargetSource] = {}
    for name, default in defaults.items():
        pool_value = getattr(pooled, name) if pooled is not None else None
        if own.get(name) is not None:
            values[name], source[name] = float(own[name]), "job"
        elif pool_value is not None:
            values[name], source[name] = float(pool_value), "pool"
        else:
            values[name], source[name] = default, "default"
    return Targets(values["ttft_seconds"], values["tpot_seconds"], values["objective_ratio"], source)


@dataclass(frozen=True, slots=True)
class SloCounts:
    """One report's requests within each target (None: the engine exports no such histogram)."""

    ttft: WithinTarget | None = None
    tpot: WithinTarget | None = None

    def as_json(self) -> dict[str, list[int] | None]:
        def pack(within: WithinTarget | None) -> list[int] | None:
            return None if within is None else [within.total, within.low, within.high]

        return {"ttft": pack(self.ttft), "tpot": pack(self.tpot)}

    @classmethod
    def from_json(cls, stored: dict[str, list[int] | None] | None) -> SloCounts:
        def unpack(packed: list[int] | None) -> WithinTarget | None:
            return None if not packed else WithinTarget(int(packed[0]), int(packed[1]), int(packed[2]))

        stored = stored or {}
        return cls(ttft=unpack(stored.get("ttft")), tpot=unpack(stored.get("tpot")))


@dataclass(frozen=True, slots=True)
class Goodput:
    """SLO goodput over a window: the share meeting both targets as (lower, upper), and the rate of the lower."""

    lower: float | None
    upper: float | None
    requests_per_second: float | None
    requests: int
    window_seconds: float
    ttft_met: tuple[float, float] | None
    tpot_met: tuple[float, float] | None
    reason: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "ratio": self.lower,
            "upper_ratio": self.upper,
            "requests_per_second": self.requests_per_second,
            "requests": self.requests,
            "window_seconds": self.window_seconds,
            "ttft_met_ratio": None if self.ttft_met is None else list(self.ttft_met),
            "tpot_met_ratio": None if self.tpot_met is None else list(self.tpot_met),
            "method": METHOD,
            "reason": self.reason,
        }


def _sum(parts: Iterable[WithinTarget | None]) -> WithinTarget | None:
    total: WithinTarget | None = None
    for part in parts:
        if part is not None:
            total = part if total is None else total + part
    return total


def goodput(counts: Iterable[SloCounts], window_seconds: float, *, engine: str | None = None) -> Goodput:
    """The goodput of the reports ``counts`` (those of the window), ``window_seconds`` long."""
    counts = list(counts)
    ttft, tpot = _sum(c.ttft for c in counts), _sum(c.tpot for c in counts)
    ttft_met = ttft.ratio() if ttft is not None else None
    tpot_met = tpot.ratio() if tpot is not None else None
    requests = tpot.total if tpot is not None else (ttft.total if ttft is not None else 0)
    reason = _missing(ttft, tpot, engine)
    if reason is not None or ttft_met is None or tpot_met is None:
        return Goodput(None, None, None, requests, window_seconds, ttft_met, tpot_met, reason or "no requests")
    lower = max(0.0, ttft_met[0] + tpot_met[0] - 1.0)
    upper = min(ttft_met[1], tpot_met[1])
    rate = lower * requests / window_seconds if window_seconds > 0 else None
    return Goodput(lower, upper, rate, requests, window_seconds, ttft_met, tpot_met)


def _missing(ttft: WithinTarget | None, tpot: WithinTarget | None, engine: str | None) -> str | None:
    if ttft is None and engine == "tgi":
        return "TGI exports no time-to-first-token histogram (only queue, inference and mean time per token)"
    if ttft is None:
        return "no time-to-first-token histogram from the engine"
    if tpot is None and engine == "vllm":
        return (
            "this vLLM exports time per output token per token only (time_per_output_token_seconds, "
            "inter_token_latency_seconds); the per-request histogram request_time_per_output_token_seconds "
            "arrived in vLLM 0.11"
        )
    if tpot is None:
        return "no per-request time-per-output-token histogram from the engine"
    if ttft.total == 0 and tpot.total == 0:
        return "no requests in the window"
    return None
