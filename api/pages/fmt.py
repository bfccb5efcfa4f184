"""How the pages print numbers: units always named, ratios as percentages with the 0-1 value in ``title``, and an
unknown value as ``—`` with the reason, never a made-up zero.

Each function returns :class:`markupsafe.Markup` (escaped here, so templates print it as is).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from markupsafe import Markup, escape

from mfumon.api.pricing.prices import JOULES_PER_KWH

DASH = "—"


def unknown(reason: str | None = None) -> Markup:
    """``—`` and why the value is unknown (the reason is also the tooltip)."""
    if not reason:
        return Markup('<span class="unknown">—</span>')
    return Markup('<span class="unknown" title="{0}">— <small>({0})</small></span>').format(reason)


def ratio(value: float | None, reason: str | None = None, *, digits: int = 1) -> Markup:
    """A 0-1 ratio as ``45.2 %``, the exact ratio in the title attribute."""
    if value is None:
        return unknown(reason)
    return Markup('<span class="ratio" title="{0:.4f}">{1} %</span>').format(value, f"{value * 100:.{digits}f}")


def _scaled(value: float, units: tuple[tuple[float, str], ...]) -> str:
    for factor, unit in units:
        if abs(value) >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value:.3g} {units[-1][1]}" if units[-1][0] == 1 else f"{value:.3g}"


_FLOPS = ((1e18, "EFLOP/s"), (1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1.0, "FLOP/s"))
_COUNT = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def flops_per_second(value: float | None, reason: str | None = None) -> Markup:
    """FLOP/s in the largest unit that keeps a digit before the point (``3.45 PFLOP/s``)."""
    if value is None:
        return unknown(reason)
    return Markup('<span title="{0:.6g} FLOP/s">{1}</span>').format(value, _scaled(value, _FLOPS))


def count(value: float | None, unit: str, reason: str | None = None) -> Markup:
    """A count with its unit (``12.3 k tokens/s``); the exact value in the title."""
    if value is None:
        return unknown(reason)
    scaled = _scaled(value, _COUNT).rstrip()
    return Markup('<span title="{0:.6g} {1}">{2} {1}</span>').format(value, unit, scaled)


def gpu_hours(gpu_seconds: float | None, reason: str | None = None) -> Markup:
    """GPU-seconds shown as GPU-hours (the unit people budget in), or as GPU-seconds below a tenth of an hour so a
    short run does not read ``0.00``; GPU-seconds in the title."""
    if gpu_seconds is None:
        return unknown(reason)
    if abs(gpu_seconds) < 360:
        return Markup('<span title="{0:.1f} GPU-seconds">{0:.0f} GPU-s</span>').format(gpu_seconds)
    return Markup('<span title="{0:.0f} GPU-seconds">{1:.2f} GPU-h</span>').format(gpu_seconds, gpu_seconds / 3600)


GPU_HOURS, GPU_SECONDS = "GPU-h", "GPU-s"


def gpu_time_unit(values: Iterable[float | None]) -> str:
    """The one unit a column of GPU-times is printed in: GPU-hours when its largest value is a tenth of an hour or
    more, else GPU-seconds (so a column never mixes ``24 GPU-s`` with ``0.13 GPU-h``)."""
    largest = max((abs(v) for v in values if v is not None), default=0.0)
    return GPU_HOURS if largest >= 360 else GPU_SECONDS


def gpu_time(gpu_seconds: float | None, unit: str, reason: str | None = None) -> Markup:
    """GPU-seconds in ``unit`` (:func:`gpu_time_unit` of the column); GPU-seconds in the title."""
    if gpu_seconds is None:
        return unknown(reason)
    if unit == GPU_HOURS:
        return Markup('<span title="{0:.0f} GPU-seconds">{1:.2f} GPU-h</span>').format(gpu_seconds, gpu_seconds / 3600)
    return Markup('<span title="{0:.1f} GPU-seconds">{0:.0f} GPU-s</span>').format(gpu_seconds)


def seconds(value: float | None, reason: str | None = None) -> Markup:
    """A duration: ``850 ms``, ``12.5 s``, ``4.2 min``, ``3.1 h``."""
    if value is None:
        return unknown(reason)
    if value < 1:
        text = f"{value * 1000:.0f} ms"
    elif value < 120:
        text = f"{value:.3g} s"
    elif value < 7200:
        text = f"{value / 60:.1f} min"
    else:
        text = f"{value / 3600:.1f} h"
    return Markup('<span title="{0:.3f} s">{1}</span>').format(value, text)


def latency(value: float | None, reason: str | None = None) -> Markup:
    """A latency to three significant digits: ``42.5 ms``, ``850 ms``, ``1.25 s`` (seconds in the title)."""
    if value is None:
        return unknown(reason)
    if value < 0.9995:
        text = f"{value * 1000:.3g} ms"
    elif value < 99.95:
        text = f"{value:.3g} s"
    else:
        text = f"{value:.0f} s"
    return Markup('<span class="latency" title="{0:.6g} s">{1}</span>').format(value, text)


def when(timestamp: float | None, reason: str | None = None) -> Markup:
    """A Unix time as UTC (the server's clock; Unix seconds in the title)."""
    if timestamp is None:
        return unknown(reason)
    text = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))
    return Markup('<time title="{0:.0f} (Unix seconds)">{1}</time>').format(timestamp, text)


def text(value: object | None, reason: str | None = None) -> Markup:
    """A label or number as given, or ``—``."""
    if value is None or value == "":
        return unknown(reason)
    return Markup(escape(str(value)))


_RATIO_WORDS = (
    "share",
    "ratio",
    "spread",
    "deviation",
    "mfu",
    "mbu",
    "agreement",
    "active",
    "utilization",
    "usage",
    "goodput",
)


#: evidence keys whose words alone would mislead or read oddly; any other key is its words (``share_of_step_time``:
#: "Share of step time")
_KEY_LABELS = {
    "gpu_seconds": "GPU-time at stake",
    "mfu": "MFU",
    "hardware_mfu": "hardware MFU (estimate)",
    "reported_mfu": "reported MFU",
    "baseline_mfu": "baseline MFU",
    "sm_active": "SM active",
    "gpus": "GPUs",
    "throttled_gpus": "throttled GPUs",
    "ttft_target_seconds": "TTFT target",
    "tpot_target_seconds": "TPOT target",
    "kv_cache_usage": "KV-cache use",
    "profile_id": "profile",
}
_WORDS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "mfu": "MFU",
    "mbu": "MBU",
    "sm": "SM",
    "kv": "KV",
    "ttft": "TTFT",
    "tpot": "TPOT",
    "slo": "SLO",
    "id": "id",
    "hfu": "HFU",
    "nvlink": "NVLink",
    "ib": "InfiniBand",
}


def label(key: str) -> str:
    """A snake_case key as words for people (``share_of_step_time`` -> "share of step time", ``gpu`` -> "GPU")."""
    if key in _KEY_LABELS:
        return _KEY_LABELS[key]
    words = [_WORDS.get(w, w) for w in str(key).split("_") if w]
    return " ".join(words) or str(key)


def gpu_name(item: dict[str, object]) -> Markup:
    """A GPU named as people find it, its index and node (``GPU 3 on node-7``); the UUID in the title only."""
    uuid = item.get("uuid")
    shown = Markup("GPU {0} on {1}").format(item.get("gpu"), item.get("node"))
    return Markup('<span title="{0}">{1}</span>').format(uuid, shown) if uuid else shown


def evidence(value: object, key: str = "") -> Markup:
    """A finding's evidence value: a ratio (by its key's name: ``share_of_step_time``, ``clock_ratio``,
    ``kv_cache_usage``) as a percentage, GPU-seconds with their unit, other seconds (``ttft_target_seconds``) as a
    duration, other floats to four significant digits, lists and objects spelt out."""
    if isinstance(value, float) and any(word in key for word in _RATIO_WORDS):
        return ratio(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith("gpu_seconds"):
        return gpu_hours(float(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith("_seconds"):
        return latency(float(value))
    if isinstance(value, float):
        return Markup(escape(f"{value:.4g}"))
    if isinstance(value, dict):
        parts = []
        if "node" in value and "gpu" in value:
            parts.append(gpu_name(value))
            value = {k: v for k, v in value.items() if k not in ("node", "gpu", "uuid")}
        parts += [Markup("{0}: {1}").format(label(str(k)), evidence(v, str(k))) for k, v in value.items()]
        return Markup("; ").join(parts)
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, dict) for v in value):
            return Markup("").join(Markup("<div>{0}</div>").format(evidence(v, key)) for v in value)
        return Markup(", ").join(evidence(v, key) for v in value)
    return text(value, "none")


def unpriced(reason: str = "no price covers these GPU-hours: PUT /v1/prices or MFUMON_PRICES_FILE") -> Markup:
    """A cost nothing priced: the word, the reason in the title (never 0, never blank)."""
    return Markup('<span class="unpriced" title="{0}">unpriced</span>').format(reason)


def money(value: float | None, currency: str, reason: str | None = None) -> Markup:
    """An amount in ``currency`` (``1,234.56 EUR``), the exact value in the title; None is "unpriced"."""
    if value is None:
        return unpriced(reason) if reason else unpriced()
    shown = f"{value:,.2f}" if value == 0 or abs(value) >= 0.01 else f"{value:.2g}"
    return Markup('<span class="money" title="{0:.6g} {1}">{2} {1}</span>').format(value, currency, shown)


def kwh(joules: float) -> Markup:
    """Energy in kWh, joules in the title."""
    value = joules / JOULES_PER_KWH
    shown = (
        f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g}"
    )
    return Markup('<span title="{0:.6g} J">{1} kWh</span>').format(joules, shown)


def per_token(value: float | None, energy_joules: float, unit: str = "token") -> Markup:
    """Joules per token (or request), in J, kJ or MJ (``0.085 J/token``, ``9.99 kJ/request``); ``—`` and why."""
    if value is None:
        return unknown("no energy" if not energy_joules else f"no {unit}s")
    scale, prefix = next(((f, p) for f, p in ((1e6, "M"), (1e3, "k")) if abs(value) >= f), (1.0, ""))
    return Markup('<span title="{0:.6g} J/{1}">{2:.3g} {3}J/{1}</span>').format(value, unit, value / scale, prefix)
