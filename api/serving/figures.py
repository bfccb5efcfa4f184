"""One serving report's request figures, as its history row keeps them (``job_reports.serving``), and the job's
window over them (the SLO goodput, the pressure the diagnosis reads).

Latency percentiles are those of the report's own interval (its histograms' increase): a window's percentile
would need the window's buckets, which no row keeps. The goodput's counts are kept, so the window's is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mfumon.api.schemas.jobs import JobReportCreate, LatencyHistogram
from mfumon.api.serving.histograms import Buckets, Quantile
from mfumon.api.serving.slo import Goodput, SloCounts, Targets, goodput

__all__ = ["HISTOGRAMS", "QUANTILES", "ServingFigures", "ServingWindow", "figures_of", "window_of"]

#: report field -> the name its percentiles carry
HISTOGRAMS: dict[str, str] = {
    "ttft_histogram": "ttft",
    "tpot_histogram": "tpot",
    "itl_histogram": "itl",
    "queue_histogram": "queue",
}
QUANTILES: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _buckets(histogram: LatencyHistogram | None) -> Buckets | None:
    if histogram is None:
        return None
    return Buckets(le=histogram.le, counts=histogram.counts, count=histogram.count, sum=histogram.sum)


def _seconds(quantile: Quantile | None) -> float | None:
    return None if quantile is None else quantile.seconds


@dataclass(frozen=True, slots=True)
class ServingFigures:
    """What one serving report's histograms and gauges came to; None: not exported by the engine. The SLO counts are
    against the targets in force when the report came."""

    at: float
    interval_seconds: float
    engine: str | None = None
    requests_finished: int | None = None
    preemptions: int | None = None
    request_running_seconds: float | None = None
    slo: SloCounts = field(default_factory=SloCounts)
    percentiles: Mapping[str, float | None] = field(default_factory=dict)  # e.g. "ttft_p90" -> seconds
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    batch_size: float | None = None
    mean_prompt_tokens: float | None = None
    prefill_tokens_per_second: float | None = None
    decode_tokens_per_second: float | None = None
    prefill_mfu: float | None = None
    decode_mfu: float | None = None
    mbu: float | None = None
    slo_goodput_ratio: float | None = None  # the window's, as of this report
    slo_goodput_upper_ratio: float | None = None

    @property
    def requests_per_second(self) -> float | None:
        if self.requests_finished is None or self.interval_seconds <= 0:
            return None
        return self.requests_finished / self.interval_seconds

    def percentile(self, name: str) -> float | None:
        return self.percentiles.get(name)

    def as_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "interval_seconds": self.interval_seconds,
            "engine": self.engine,
            "requests_finished": self.requests_finished,
            "requests_per_second": self.requests_per_second,
            "preemptions": self.preemptions,
            "request_running_seconds": self.request_running_seconds,
            "slo_counts": self.slo.as_json(),
            **dict(self.percentiles),
            "requests_running": self.requests_running,
            "requests_waiting": self.requests_waiting,
            "kv_cache_usage": self.kv_cache_usage,
            "batch_size": self.batch_size,
            "mean_prompt_tokens": self.mean_prompt_tokens,
            "prefill_tokens_per_second": self.prefill_tokens_per_second,
            "decode_tokens_per_second": self.decode_tokens_per_second,
            "prefill_mfu": self.prefill_mfu,
            "decode_mfu": self.decode_mfu,
            "mbu": self.mbu,
            "slo_goodput_ratio": self.slo_goodput_ratio,
            "slo_goodput_upper_ratio": self.slo_goodput_upper_ratio,
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ServingFigures:
        names = {f"{short}_{q}" for short in HISTOGRAMS.values() for q in QUANTILES}

        def number(key: str) -> float | None:
            value = stored.get(key)
            return None if value is None else float(value)

        def whole(key: str) -> int | None:
            value = stored.get(key)
            return None if value is None else int(value)

        return cls(
            at=float(stored.get("at") or 0.0),
            interval_seconds=float(stored.get("interval_seconds") or 0.0),
            engine=stored.get("engine"),
            requests_finished=whole("requests_finished"),
            preemptions=whole("preemptions"),
            request_running_seconds=number("request_running_seconds"),
            slo=SloCounts.from_json(stored.get("slo_counts")),
            percentiles={name: number(name) for name in sorted(names) if name in stored},
            requests_running=number("requests_running"),
            requests_waiting=number("requests_waiting"),
            kv_cache_usage=number("kv_cache_usage"),
            batch_size=number("batch_size"),
            mean_prompt_tokens=number("mean_prompt_tokens"),
            prefill_tokens_per_second=number("prefill_tokens_per_second"),
            decode_tokens_per_second=number("decode_tokens_per_second"),
            prefill_mfu=number("prefill_mfu"),
            decode_mfu=number("decode_mfu"),
            mbu=number("mbu"),
            slo_goodput_ratio=number("slo_goodput_ratio"),
            slo_goodput_upper_ratio=number("slo_goodput_upper_ratio"),
        )


def figures_of(report: JobReportCreate, targets: Targets, at: float, **derived: float | None) -> ServingFigures:
    """A serving report's figures against ``targets``; ``derived`` are the evaluation's (phase MFUs, MBU, rates)."""
    percentiles: dict[str, float | None] = {}
    for name_of_field, short in HISTOGRAMS.items():
        buckets = _buckets(getattr(report, name_of_field))
        if buckets is not None:
            for name, q in QUANTILES.items():
                percentiles[f"{short}_{name}"] = _seconds(buckets.quantile(q))
    ttft, tpot = _buckets(report.ttft_histogram), _buckets(report.tpot_histogram)
    slo = SloCounts(
        ttft=None if ttft is None else ttft.within(targets.ttft_seconds),
        tpot=None if tpot is None else tpot.within(targets.tpot_seconds),
    )
    finished = report.requests_finished
    if finished is None and report.tpot_histogram is not None:
        finished = report.tpot_histogram.count
    return ServingFigures(
        at=at,
        interval_seconds=float(report.interval_seconds or 0.0),
        engine=report.engine,
        requests_finished=finished,
        preemptions=report.preemptions,
        request_running_seconds=report.request_running_seconds,
        slo=slo,
        percentiles=percentiles,
        requests_running=None if report.requests_running is None else float(report.requests_running),
        requests_waiting=None if report.requests_waiting is None else float(report.requests_waiting),
        kv_cache_usage=report.kv_cache_usage,
        batch_size=report.batch_size,
        mean_prompt_tokens=report.mean_prompt_tokens,
        **derived,
    )


@dataclass(frozen=True, slots=True)
class ServingWindow:
    """A serving job over the goodput window: its reports' figures (oldest first) and the goodput they give."""

    figures: tuple[ServingFigures, ...]
    goodput: Goodput
    targets: Targets

    def mean(self, name: str) -> float | None:
        values = [getattr(f, name) for f in self.figures if getattr(f, name) is not None]
        return sum(values) / len(values) if values else None

    def maximum(self, name: str) -> float | None:
        values = [getattr(f, name) for f in self.figures if getattr(f, name) is not None]
        return max(values) if values else None

    def total(self, name: str) -> int | None:
        values = [getattr(f, name) for f in self.figures if getattr(f, name) is not None]
        return sum(values) if values else None

    @property
    def latest(self) -> ServingFigures | None:
        return self.figures[-1] if self.figures else None


def window_of(figures: Iterable[ServingFigures], targets: Targets, window_seconds: float) -> ServingWindow:
    """The window's goodput from its reports' figures, the newest last.

    Its length is the time the reports cover: from the start of the oldest one's interval to the newest report,
    at most ``window_seconds``; the rate divides by it.
    """
    kept = tuple(figures)
    if not kept:
        empty = goodput((), window_seconds)
        return ServingWindow((), empty, targets)
    start = min(f.at - f.interval_seconds for f in kept)
    covered = min(window_seconds, max(1e-3, kept[-1].at - start))
    engine = next((f.engine for f in reversed(kept) if f.engine), None)
    return ServingWindow(kept, goodput((f.slo for f in kept), covered, engine=engine), targets)
