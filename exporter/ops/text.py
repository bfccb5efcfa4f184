"""Number and time formats shared by the report's renderers."""

from __future__ import annotations

import time

BLANK = "\N{EN DASH}"  # a figure that is not known


def when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(stamp))


def hours(value: float) -> str:
    """GPU-hours: two decimals under 10 (a short window's jobs), one under 100, thousands separated above."""
    if abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


def pct(value: float | None) -> str:
    return BLANK if value is None else f"{100 * value:.1f}%"


def money(value: float | None, currency: str | None) -> str:
    if value is None or currency is None:
        return BLANK
    return f"{value:,.0f} {currency}" if abs(value) >= 100 else f"{value:,.2f} {currency}"


def name(value: str | None, none: str = "(none)") -> str:
    return none if value is None else value


def wasters_title(count: int) -> str:
    return f"The {count} jobs that wasted most" if count > 1 else "The job that wasted most" if count else "Waste"


def bounds(lower: float | None, upper: float | None, reason: str | None = None) -> str:
    """A share known only between two bounds (SLO goodput): one figure when they agree at the shown precision."""
    if lower is None or upper is None:
        return f"{BLANK} ({reason})" if reason else BLANK
    return pct(lower) if pct(lower) == pct(upper) else f"{pct(lower)} to {pct(upper)}"


def serving_columns() -> list[str]:
    return [
        "job",
        "team",
        "engine",
        "req/s",
        "SLO goodput",
        "TTFT / TPOT",
        "objective",
        "below",
        "GPU-h",
        "idle",
        "down",
    ]


SERVING_NOTE = (
    "SLO goodput: the share of requests within both their TTFT and TPOT targets over the newest 5 minutes, at least "
    "and at most (the engines' histograms bound it). Below: certainly below the objective, even the upper bound is."
)
