"""What the compare page shows: ``mfumon.api.services.compare`` laid out as two columns and two waterfalls."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from mfumon.api.context import AppContext
from mfumon.api.pages import fmt
from mfumon.api.pages.svg import Part, stacked_bar
from mfumon.api.services.compare import compare

_RATIOS = {"mfu", "latest_mfu", "lifetime_mfu", "compute_mfu", "goodput_ratio"}
LABELS = {
    "mfu": "MFU (time-weighted over the reports)",
    "tokens_per_second_per_gpu": "Throughput per GPU",
    "latest_mfu": "MFU of the latest report",
    "lifetime_mfu": "Lifetime MFU (over all allocated time)",
    "compute_mfu": "Compute MFU (over compute time only)",
    "goodput_ratio": "Goodput",
    "gpu_hours": "Allocated GPU-hours",
    "num_gpus": "GPUs",
    "restarts": "Restarts",
    "failures": "Failures",
}


def value(metric: str, v: float | None) -> Markup:
    """One figure of the comparison in its unit; ``—`` when that job does not have it."""
    reason = "not known for this job"
    if metric in _RATIOS:
        return fmt.ratio(v, reason)
    if metric == "tokens_per_second_per_gpu":
        return fmt.count(v, "tokens/s/GPU", reason)
    if metric == "gpu_hours":
        return fmt.gpu_hours(None if v is None else v * 3600, reason)
    return fmt.text(None if v is None else f"{v:g}", reason)


def delta(metric: str, d: float | None) -> Markup:
    """b - a: ratio points for ratios, else in the figure's unit."""
    if d is None:
        return fmt.unknown("one side unknown")
    if metric in _RATIOS:
        return Markup('<span title="{0:+.4f}">{1:+.1f} pt</span>').format(d, d * 100)
    return Markup("{0}{1}").format("-" if d < 0 else "+", value(metric, abs(d)))


def compare_page(ctx: AppContext, a: str, b: str) -> dict[str, Any]:
    """The template's context for ``/ui/compare``; :class:`NotFoundError` names a job that does not exist."""
    result = compare(ctx, a, b)
    bars = {}
    for side in ("a", "b"):
        parts = [Part(w.category, getattr(w, f"{side}_gpu_seconds"), f"wf-{w.category}") for w in result.waterfall]
        if sum(p.value for p in parts) > 0:
            bars[side] = stacked_bar(f"chart-waterfall-{side}", f"Waterfall of job {side}", parts)
    return {"result": result, "labels": LABELS, "bars": bars, "value": value, "delta": delta}
