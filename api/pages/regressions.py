"""``/ui/regressions``: the fleet's software changes and what they did to MFU (issue 59), from the same comparison
as ``GET /v1/regressions``: called regressions first, then improvements, changes that did nothing, and steps with too
few jobs to tell."""

from __future__ import annotations

from typing import Any

from mfumon.api.context import AppContext
from mfumon.api.pages.view import PageQuery
from mfumon.api.regressions.analysis import ALPHA, MIN_EFFECT, MIN_JOBS, Change
from mfumon.api.services.regressions import read_changes

#: The window compared when the page names none: upgrades roll out over weeks.
DEFAULT_SECONDS = 30 * 86400
_ORDER = {"regression": 0, "improvement": 1, "no_change": 2, "too_few_jobs": 3}
VERDICT_LABELS = {
    "regression": "Regression",
    "improvement": "Improvement",
    "no_change": "No change beyond the noise",
    "too_few_jobs": "Too few jobs to tell",
}


def regressions_page(ctx: AppContext, query: PageQuery) -> dict[str, Any]:
    """The template's context: every component step, most serious first (then by relative change)."""
    now = ctx.clock()
    seconds = query.range_seconds or DEFAULT_SECONDS
    changes = read_changes(ctx, now - seconds, now)

    def order(change: Change) -> tuple[int, float]:
        return (_ORDER[change.verdict], change.relative_change or 0.0)

    return {
        "q": query,
        "changes": sorted(changes, key=order),
        "window_days": seconds / 86400,
        "labels": VERDICT_LABELS,
        "min_jobs": MIN_JOBS,
        "alpha": ALPHA,
        "min_effect": MIN_EFFECT,
    }
