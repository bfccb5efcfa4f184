"""``/ui/chargeback``: who used the fleet's GPU-hours and energy over a window, and what they cost (issue 60), from
the same figures as ``GET /v1/chargeback``: a row per team, jobs without a team, idle capacity and unreported busy
GPUs that add up to the fleet, the fleet's cost by category, the pools and the jobs.

A cost no price covers shows as "unpriced", never as 0 or a blank: the API's null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup

from mfumon.api.context import AppContext
from mfumon.api.errors import InputError
from mfumon.api.pages import fmt
from mfumon.api.pages.svg import Part, stacked_bar
from mfumon.api.pages.view import PageQuery, Table
from mfumon.api.schemas.chargeback import ChargebackJob, ChargebackRow, CostEntry
from mfumon.api.services.chargeback import read_chargeback
from mfumon.api.services.usage import parse_time

#: The windows the page links, as ``?since=`` (the API's forms; any other it takes works too).
WINDOWS = ("24h", "7d", "30d")
DEFAULT_SINCE = "30d"
#: The most jobs the page lists; the rest are in ``GET /v1/chargeback`` and ``mfumon report --chargeback``.
MAX_JOBS_SHOWN = 500
_ROW_LABELS = {"no_team": "jobs without a team", "idle": "idle capacity", "unreported": "unreported busy GPUs"}
_ROW_NOTES = {
    "no_team": "jobs that named no team",
    "idle": "GPUs no job held",
    "unreported": "busy GPUs no job reports for: jobs that post no throughput, and work without a job id",
}
_ROW_ORDER = {"team": 0, "no_team": 1, "idle": 2, "unreported": 3}
_CATEGORY_LABELS = {
    "energy": "energy drawn by jobs",
    "idle_energy": "energy drawn by idle GPUs",
    "unreported_energy": "energy drawn by unreported busy GPUs",
    "idle": "idle GPU-hours",
    "unreported": "unreported busy GPU-hours",
}
_ENERGY_CATEGORIES = frozenset(("energy", "idle_energy", "unreported_energy"))


@dataclass(frozen=True, slots=True)
class Line:
    """A row of the rows or pools table: the API's row, its label and the page it links to."""

    row: ChargebackRow
    label: str
    href: str | None
    note: str = ""

    @property
    def order(self) -> tuple[int, str]:
        return (_ROW_ORDER.get(self.row.kind, 9), self.row.name or "")


def _amount_columns(get: Callable[[Any], Any]) -> dict[str, tuple[str, str, Callable[[Any], Any]]]:
    """The figure columns shared by the tables; ``get`` turns a table's item into its API row or job."""
    return {
        "gpu_hours": ("GPU-hours", "desc", lambda x: get(x).gpu_seconds),
        "cost": ("Cost", "desc", lambda x: get(x).cost),
        "unpriced": ("Unpriced GPU-hours", "desc", lambda x: get(x).unpriced_gpu_seconds),
        "energy": ("Energy", "desc", lambda x: get(x).energy_joules),
        "tokens": ("Tokens", "desc", lambda x: get(x).tokens),
        "cost_per_mtok": ("Cost per million tokens", "desc", lambda x: get(x).cost_per_million_tokens),
        "j_per_token": ("J/token", "asc", lambda x: get(x).joules_per_token),
    }


def _row_of(line: Line) -> ChargebackRow:
    return line.row


def _job_of(job: ChargebackJob) -> ChargebackJob:
    return job


ROWS_TABLE: Table[Line] = Table(
    "rows", {"row": ("Who", "asc", lambda x: x.order), **_amount_columns(_row_of)}, default="row"
)
POOLS_TABLE: Table[Line] = Table(
    "pools", {"pool": ("Pool", "asc", lambda x: x.row.name), **_amount_columns(_row_of)}, default="pool"
)
JOBS_TABLE: Table[ChargebackJob] = Table(
    "jobs",
    {
        "job": ("Job", "asc", lambda j: j.job_id),
        "team": ("Team", "asc", lambda j: j.team),
        **_amount_columns(_job_of),
        "j_per_request": ("J/request", "asc", lambda j: j.joules_per_request),
    },
    default="cost",
    default_dir="desc",
)
CHARGEBACK_TABLES = (ROWS_TABLE, POOLS_TABLE, JOBS_TABLE)


def window_of(query: PageQuery, now: float) -> tuple[str, float, float]:
    """The page's ``since`` as given (30d by default) and its window in Unix seconds; :class:`InputError` for a
    value ``GET /v1/chargeback`` would refuse (the same rule: Unix seconds or a duration back from now)."""
    since = query.params.get("since") or DEFAULT_SINCE
    until = query.params.get("until") or None
    start = parse_time(since, now=now, field="since")
    end = parse_time(until, now=now, field="until") if until is not None else now
    if start >= end:
        raise InputError("since", "since must be before until (default: now)")
    return since, start, end


def chargeback_page(ctx: AppContext, query: PageQuery) -> dict[str, Any]:
    """The template's context: the chargeback of the query's window, its tables sorted as the query asks."""
    since, start, end = window_of(query, ctx.clock())
    window = {"since": since, "until": query.params.get("until") or ""}
    data = read_chargeback(ctx, start, end)
    prices = ctx.state.prices
    rows = [_line(r) for r in data.rows]
    pools = [Line(p, p.name or "", _jobs_href("pool", p.name)) for p in data.pools]
    jobs = query.sorted(JOBS_TABLE, data.jobs)
    unit = fmt.gpu_time_unit([data.fleet.gpu_seconds])  # one unit for the page: every row is a part of the fleet
    energy_priced = prices.kwh is not None
    shown = [c for c in data.fleet.categories if _shown(c, data.fleet.energy_joules > 0)]
    categories = [_category(c, energy_priced, data.fleet.cost) for c in shown]
    return {
        "q": query,
        "ranged": False,
        "since": since,
        "windows": [(w, query.url(since=w, until=None), w == since and not query.params.get("until")) for w in WINDOWS],
        "data": data,
        "prices": prices,
        "energy_priced": energy_priced,
        "unit": unit,
        "tables": {t.name: t for t in CHARGEBACK_TABLES},
        "rows": query.sorted(ROWS_TABLE, rows),
        "pools": query.sorted(POOLS_TABLE, pools),
        "jobs": jobs[:MAX_JOBS_SHOWN],
        "jobs_left_out": max(0, len(jobs) - MAX_JOBS_SHOWN),
        "categories": categories,
        "cost_chart": _cost_chart(categories),
        "money": lambda value, reason=None: fmt.money(value, data.currency, reason),
        "per_million": lambda item: per_million(item, data.currency),
        "kwh": fmt.kwh,
        "per_token": fmt.per_token,
        "json_href": "/v1/chargeback?" + urlencode({k: v for k, v in window.items() if v}),
    }


def _jobs_href(key: str, value: str | None) -> str | None:
    return f"/ui/jobs?{urlencode({key: value})}" if value else None


def _line(row: ChargebackRow) -> Line:
    if row.kind == "team":
        return Line(row, row.name or "", _jobs_href("team", row.name), "the team's jobs")
    return Line(row, _ROW_LABELS[row.kind], None, _ROW_NOTES[row.kind])


@dataclass(frozen=True, slots=True)
class CategoryLine:
    """A category of the fleet's cost: its entry, its cost (None: unpriced) and its share of the fleet's cost."""

    entry: CostEntry
    label: str
    energy: bool
    cost: float | None
    share: float | None


def _category(entry: CostEntry, energy_priced: bool, fleet_cost: float | None) -> CategoryLine:
    energy = entry.category in _ENERGY_CATEGORIES
    cost = None if energy and not energy_priced and not entry.cost else entry.cost
    share = cost / fleet_cost if cost is not None and fleet_cost else None
    return CategoryLine(entry, category_label(entry.category), energy, cost, share)


def _shown(entry: CostEntry, energy_drawn: bool) -> bool:
    """Whether the breakdown lists a category: any GPU-time or cost in it, or energy that was drawn (priced or not)."""
    if entry.category in _ENERGY_CATEGORIES:
        return energy_drawn
    return entry.gpu_seconds > 0 or (entry.cost or 0) > 0 or entry.unpriced_gpu_seconds > 0


def category_label(category: str) -> str:
    return _CATEGORY_LABELS.get(category) or fmt.label(category)


def _cost_chart(categories: list[CategoryLine]) -> Markup | None:
    """The fleet's cost as one bar split by category (None when nothing is priced)."""
    parts = [
        Part(c.label, c.cost, "s1" if c.energy else f"wf-{c.entry.category}")
        for c in categories
        if c.cost is not None and c.cost > 0
    ]
    return stacked_bar("chart-cost", "The fleet's cost by category", parts) if parts else None


def per_million(item: ChargebackRow | ChargebackJob, currency: str) -> Markup:
    """Cost per million tokens: "unpriced" where the cost is, ``—`` where no tokens were counted."""
    if item.cost is None:
        return fmt.unpriced()
    if item.cost_per_million_tokens is None:
        return fmt.unknown("no tokens")
    return fmt.money(item.cost_per_million_tokens, currency)
