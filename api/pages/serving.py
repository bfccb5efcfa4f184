"""What a serving job's page shows (kind ``inference``): its SLO goodput and targets, request latencies, load, MBU and
MFU by phase, the serving waterfall, and their history as charts; every unknown value with the reason.

It reads what the JSON API serves and nothing else: the newest report's ``serving`` object (the job JSON's
``serving``, :func:`mfumon.api.services.report_serving.summary`), the job's ledger split by serving category (the
job JSON's ``serving_waterfall``) and the ``serving`` figures of each history row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from mfumon.api.accounting import Ledger
from mfumon.api.core.config import Settings
from mfumon.api.db.tables import JobRow
from mfumon.api.pages.svg import Band, Part, Reference, Series, line_chart, nice_top, stacked_bar
from mfumon.api.serving import SERVING_CATEGORIES, resolve_targets, serving_waterfall
from mfumon.api.serving.waterfall import METHOD as WATERFALL_METHOD
from mfumon.api.state.outcome import ReportOutcome

__all__ = ["Chart", "Latency", "ServingPage", "Target", "serving_page"]

#: the histograms the page shows: short name, label, the target's key (None: no target)
LATENCIES: tuple[tuple[str, str, str | None], ...] = (
    ("ttft", "TTFT (time to first token)", "ttft_seconds"),
    ("tpot", "TPOT (time per output token, per request)", "tpot_seconds"),
    ("itl", "ITL (inter-token latency, per token)", None),
    ("queue", "Queue time (per request)", None),
)
HISTOGRAM_FIELDS = {
    "ttft": "ttft_histogram",
    "tpot": "tpot_histogram",
    "itl": "itl_histogram",
    "queue": "queue_histogram",
}
NO_SERVING_YET = "no report yet"


@dataclass(frozen=True, slots=True)
class Target:
    """One SLO target and where it came from (job, pool or default)."""

    name: str
    value: float
    source: str


@dataclass(frozen=True, slots=True)
class Latency:
    """One latency histogram of the newest interval: its percentiles, its target and the window's share within."""

    key: str
    label: str
    p50: float | None
    p90: float | None
    p99: float | None
    target: Target | None
    met: tuple[float, float] | None  # share of the window's requests within the target, as bounds
    reason: str  # why the percentiles are unknown
    met_reason: str  # why the share within the target is unknown


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the serving history, or why there is none (``markup`` None)."""

    chart_id: str
    title: str
    markup: Markup | None
    series: tuple[Series, ...] = ()
    references: tuple[Reference, ...] = ()
    bands: tuple[Band, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ServingPage:
    """A serving job's figures for its page; ``reason`` says why there are none (None: there are)."""

    reason: str | None
    explanation: str | None  # the reason in full, shown once
    engine: str | None
    ttft_target: Target
    tpot_target: Target
    objective: Target
    goodput_lower: float | None
    goodput_upper: float | None
    goodput_requests_per_second: float | None
    goodput_requests: int | None
    goodput_reason: str
    goodput_method: str | None
    window_seconds: float | None
    latencies: tuple[Latency, ...]
    latency_over: str
    requests_per_second: float | None
    preemptions: int | None
    preemptions_per_second: float | None
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage: float | None
    max_kv_cache_usage: float | None
    batch_size: float | None
    mbu: float | None
    mbu_reason: str
    prefill_mfu: float | None
    decode_mfu: float | None
    prefill_tokens_per_second: float | None
    decode_tokens_per_second: float | None
    phase_reason: str
    waterfall: tuple[Part, ...]
    waterfall_total: float
    waterfall_chart: Markup | None
    waterfall_method: str
    charts: tuple[Chart, ...]
    reasons: Mapping[str, str]

    def why(self, name: str) -> str:
        """Why ``name`` (a figure of the window) is unknown."""
        return self.reason or self.reasons.get(name) or "the engine did not send it"

    @property
    def latency(self) -> dict[str, Latency]:
        return {row.key: row for row in self.latencies}

    def share(self, gpu_seconds: float) -> float | None:
        return gpu_seconds / self.waterfall_total if self.waterfall_total > 0 else None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def seconds_axis(y: float) -> str:
    if y == 0:
        return "0"
    return f"{y * 1000:.3g} ms" if y < 0.9995 else f"{y:.3g} s"


def count_axis(y: float) -> str:
    return f"{y:.3g}"


def percent_axis(y: float) -> str:
    return f"{y * 100:.3g} %"


def _why_none(job: JobRow, latest: ReportOutcome) -> tuple[str, str | None]:
    """Why a serving job has no serving figures: a short reason for each figure, and the whole story (shown once;
    None when the short reason says it all)."""
    if not job.reports_received:
        return NO_SERVING_YET, None
    if latest.inference is None:
        return "no prefill/decode split in the newest report", (
            "The newest report did not split its tokens into prefill and decode (prefill_tokens, decode_tokens): "
            "the serving figures (latency histograms, requests, KV cache, MBU) come with that split, which the node "
            "agent's inference collector sends when it reads the engine's /metrics (--inference.url)."
        )
    return "the newest report carried no serving figures", None


def _targets(job: JobRow, doc: Mapping[str, Any] | None, settings: Settings) -> tuple[Target, Target, Target]:
    names = (("TTFT", "ttft_seconds"), ("TPOT", "tpot_seconds"), ("objective", "objective_ratio"))
    slo: Mapping[str, Any] = (doc or {}).get("slo") or {}
    if slo:
        source: Mapping[str, Any] = slo.get("source") or {}
        ttft, tpot, objective = (Target(n, float(slo[k]), str(source.get(k, "default"))) for n, k in names)
        return ttft, tpot, objective
    # no serving report yet: the targets the job will be held to
    held = resolve_targets(job.slo, (job.accounting or {}).get("pool") or job.pool, settings)
    values = {
        "ttft_seconds": held.ttft_seconds,
        "tpot_seconds": held.tpot_seconds,
        "objective_ratio": held.objective_ratio,
    }
    ttft, tpot, objective = (Target(n, values[k], held.source[k]) for n, k in names)
    return ttft, tpot, objective


def _latencies(doc: Mapping[str, Any] | None, reason: str | None, ttft: Target, tpot: Target) -> tuple[Latency, ...]:
    latency = (doc or {}).get("latency") or {}
    good = (doc or {}).get("slo_goodput") or {}
    engine = (doc or {}).get("engine")
    rows = []
    for key, label, target_key in LATENCIES:
        values = {q: _number(latency.get(f"{key}_{q}")) for q in ("p50", "p90", "p99")}
        if reason:
            why = reason
        elif f"{key}_p50" not in latency:
            # the goodput's reason names the first of TTFT and TPOT missing (api/serving/slo.py)
            first = next((k for k in ("ttft", "tpot") if f"{k}_p50" not in latency), None)
            if good.get("reason") and key == first:
                why = str(good["reason"])
            else:
                why = f"the newest report sent no {HISTOGRAM_FIELDS[key]}" + (f" ({engine})" if engine else "")
        else:
            why = "no request in the newest report's interval"
        if key in ("ttft", "tpot") or any(v is not None for v in values.values()) or f"{key}_p50" in latency:
            target = ttft if target_key == "ttft_seconds" else tpot if target_key == "tpot_seconds" else None
            met = good.get(f"{key}_met_ratio") if target is not None else None
            rows.append(
                Latency(
                    key,
                    label,
                    values["p50"],
                    values["p90"],
                    values["p99"],
                    target,
                    (float(met[0]), float(met[1])) if met else None,
                    why,
                    reason
                    or (
                        f"no {key.upper()} histogram from the engine"
                        if f"{key}_p50" not in latency
                        else "no request in the window"
                    ),
                )
            )
    return tuple(rows)


def _points(rows: Sequence[Any], key: str, per_second: bool = False) -> list[tuple[float, float | None]]:
    out: list[tuple[float, float | None]] = []
    for row in rows:
        figures = row.serving if isinstance(row.serving, Mapping) else None
        value = _number(figures.get(key)) if figures else None
        if per_second and value is not None:
            interval = _number(figures.get("interval_seconds")) if figures else None
            value = value / interval if interval else None
        out.append((row.received_at, value))
    return out


def _chart(
    chart_id: str,
    title: str,
    series: list[Series],
    *,
    what: str,
    references: Sequence[Reference] = (),
    bands: Sequence[Band] = (),
    y_max: float | None = None,
    y_format: Callable[[float], str] = count_axis,
) -> Chart:
    """A chart, or why there is none: no history row carried ``what``."""
    shown = [s for s in series if any(y is not None for _, y in s.points)]
    if not shown:
        return Chart(chart_id, title, None, reason=f"no report in the job's history carried {what}")
    if y_max is None:  # all zero: an axis to 1, not to a billionth
        largest = max([y for s in shown for _, y in s.points if y is not None] + [r.y for r in references])
        y_max = nice_top(largest) if largest > 0 else 1.0
    markup = line_chart(chart_id, title, shown, references=references, bands=bands, y_max=y_max, y_format=y_format)
    return Chart(chart_id, title, markup, tuple(shown), tuple(references), tuple(bands))


def _charts(rows: Sequence[Any], ttft: Target, tpot: Target, objective: Target) -> tuple[Chart, ...]:
    rows = [r for r in rows if isinstance(r.serving, Mapping)]
    lower, upper = _points(rows, "slo_goodput_ratio"), _points(rows, "slo_goodput_upper_ratio")
    band = Band(
        "met both targets: between the lower and the upper bound",
        [(x, lo, hi) for (x, lo), (_, hi) in zip(lower, upper, strict=True)],
        "s0",
    )
    return (
        _chart(
            "chart-ttft",
            "Time to first token (newest interval of each report)",
            [Series("TTFT p90", _points(rows, "ttft_p90"), "s0"), Series("TTFT p99", _points(rows, "ttft_p99"), "s1")],
            what="a time-to-first-token histogram",
            references=[Reference(f"TTFT target {seconds_axis(ttft.value)} ({ttft.source})", ttft.value, "ref target")],
            y_format=seconds_axis,
        ),
        _chart(
            "chart-tpot",
            "Time per output token (newest interval of each report)",
            [
                Series("TPOT p90 (per request)", _points(rows, "tpot_p90"), "s0"),
                Series("TPOT p99 (per request)", _points(rows, "tpot_p99"), "s1"),
                Series("ITL p99 (per token)", _points(rows, "itl_p99"), "s2"),
            ],
            what="a time-per-output-token or inter-token-latency histogram",
            references=[Reference(f"TPOT target {seconds_axis(tpot.value)} ({tpot.source})", tpot.value, "ref target")],
            y_format=seconds_axis,
        ),
        _chart(
            "chart-goodput",
            "SLO goodput: share of requests that met both targets (last 5 minutes as of each report)",
            [Series("at least (lower bound)", lower, "s0"), Series("at most (upper bound)", upper, "s1")],
            what="an SLO goodput (it needs both a TTFT and a per-request TPOT histogram)",
            references=[
                Reference(
                    f"objective {percent_axis(objective.value)} ({objective.source})", objective.value, "ref target"
                )
            ],
            bands=[band],
            y_max=1.0,
            y_format=percent_axis,
        ),
        _chart(
            "chart-requests",
            "Requests finished per second",
            [Series("requests/s", _points(rows, "requests_per_second"), "s0")],
            what="a finished-request count",
        ),
        _chart(
            "chart-queue",
            "Requests running and waiting, batch size",
            [
                Series("running", _points(rows, "requests_running"), "s0"),
                Series("waiting", _points(rows, "requests_waiting"), "s1"),
                Series("batch size", _points(rows, "batch_size"), "s2"),
            ],
            what="running or waiting requests",
        ),
        _chart(
            "chart-kv",
            "KV-cache use",
            [Series("KV-cache use", _points(rows, "kv_cache_usage"), "s0")],
            what="a KV-cache use",
            y_max=1.0,
            y_format=percent_axis,
        ),
        _chart(
            "chart-preemptions",
            "Preemptions per second",
            [Series("preemptions/s", _points(rows, "preemptions", per_second=True), "s4")],
            what="a preemption count (TGI exports none)",
        ),
    )


def _waterfall(job: JobRow) -> tuple[tuple[Part, ...], float]:
    ledger = Ledger.from_json(job.accounting)
    rows = serving_waterfall(ledger.total_gpu_seconds, ledger.serving_gpu_seconds)
    parts = tuple(Part(c, s, f"wf-{c}", f"{s / 3600:.2f} GPU-h") for c, s in rows if c in SERVING_CATEGORIES)
    return parts, ledger.total_gpu_seconds


def _reasons(doc: Mapping[str, Any] | None) -> dict[str, str]:
    engine = (doc or {}).get("engine")
    tgi = engine == "tgi"
    return {
        "engine": "the report did not name its engine (engine: vllm, sglang or tgi)",
        "requests_per_second": "the engine sent no finished-request count (requests_finished)",
        "preemptions": "TGI exports no preemption counter"
        if tgi
        else "the engine sent no preemption counter (preemptions)",
        "requests_running": "the engine sent no running-request gauge",
        "requests_waiting": "the engine sent no waiting-request gauge",
        "kv_cache_usage": "the engine sent no KV-cache use",
        "batch_size": "the engine sent no batch size",
    }


def serving_page(
    job: JobRow, latest: ReportOutcome, rows: Sequence[Any], settings: Settings, mfu_reason: str
) -> ServingPage:
    """The serving page of ``job`` from its newest report's outcome and its history ``rows`` (oldest first)."""
    doc = latest.serving.document if latest.serving is not None else None
    reason, explanation = (None, None) if doc else _why_none(job, latest)
    ttft, tpot, objective = _targets(job, doc, settings)
    good = (doc or {}).get("slo_goodput") or {}
    inference = latest.inference
    prefill = inference.phase("prefill") if inference else None
    decode = inference.phase("decode") if inference else None
    phase_reason = mfu_reason if inference else _why_none(job, latest)[0]
    mbu_reason = (inference.document.get("mbu_reason") if inference else None) or phase_reason
    parts, total = _waterfall(job)
    get = (doc or {}).get
    return ServingPage(
        reason=reason,
        explanation=explanation,
        engine=get("engine"),
        ttft_target=ttft,
        tpot_target=tpot,
        objective=objective,
        goodput_lower=_number(good.get("ratio")),
        goodput_upper=_number(good.get("upper_ratio")),
        goodput_requests_per_second=_number(good.get("requests_per_second")),
        goodput_requests=good.get("requests"),
        goodput_reason=reason or good.get("reason") or "no requests in the window",
        goodput_method=good.get("method"),
        window_seconds=_number(good.get("window_seconds")),
        latencies=_latencies(doc, reason, ttft, tpot),
        latency_over=get("latency_over") or "the newest report's interval",
        requests_per_second=_number(get("requests_per_second")),
        preemptions=get("preemptions"),
        preemptions_per_second=_number(get("preemptions_per_second")),
        requests_running=_number(get("requests_running")),
        requests_waiting=_number(get("requests_waiting")),
        kv_cache_usage=_number(get("kv_cache_usage_ratio")),
        max_kv_cache_usage=_number(get("max_kv_cache_usage_ratio")),
        batch_size=_number(get("batch_size")),
        mbu=latest.mbu,
        mbu_reason=str(mbu_reason),
        prefill_mfu=prefill.mfu if prefill else None,
        decode_mfu=decode.mfu if decode else None,
        prefill_tokens_per_second=prefill.tokens_per_second if prefill else None,
        decode_tokens_per_second=decode.tokens_per_second if decode else None,
        phase_reason=phase_reason,
        waterfall=parts,
        waterfall_total=total,
        waterfall_chart=stacked_bar("chart-serving-waterfall", "Where the allocated GPU-time went (serving)", parts)
        if total > 0
        else None,
        waterfall_method=get("waterfall_method") or WATERFALL_METHOD,
        charts=_charts(rows, ttft, tpot, objective),
        reasons=_reasons(doc),
    )
