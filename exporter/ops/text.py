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
