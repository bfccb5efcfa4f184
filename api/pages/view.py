"""What every page takes from its query string besides its filters: a time range (``?range=6h``), how often it
reloads itself (``?refresh=60``, ``0`` for never: a ``<meta http-equiv="refresh">``, no script) and how a table is
sorted (``?sort=jobs.mfu&dir=desc``: the table's name, a dot, the column). Links keep the other parameters."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from markupsafe import Markup

from mfumon.api.errors import MfumonError

T = TypeVar("T")

#: the time ranges a page offers, in the order of its links
RANGES: dict[str, int] = {"1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600, "7d": 7 * 24 * 3600}
RANGE_LABELS = {"1h": "last hour", "6h": "6 h", "24h": "24 h", "7d": "7 d"}
DEFAULT_REFRESH = 60
MAX_REFRESH = 86_400
DIRECTIONS = ("asc", "desc")


class QueryError(MfumonError, ValueError):
    """A range, refresh or sort value the page does not take; the message says which values it does."""


@dataclass(frozen=True, slots=True)
class PageQuery:
    """The page's path and query: the range (``None``: the page's default span), refresh seconds and sort."""

    path: str
    params: Mapping[str, str] = field(default_factory=dict)  # every parameter as given, filters included
    range: str | None = None
    refresh: int = DEFAULT_REFRESH
    sort: str = ""
    dir: str = ""

    @property
    def range_seconds(self) -> int | None:
        return RANGES[self.range] if self.range else None

    def url(self, **changes: str | int | None) -> str:
        """This page's URL with ``changes`` applied (``None`` or ``""`` drops a parameter)."""
        params = {k: str(v) for k, v in self.params.items() if v not in (None, "")}
        for key, value in changes.items():
            if value is None or value == "":
                params.pop(key, None)
            else:
                params[key] = str(value)
        return self.path + ("?" + urlencode(params) if params else "")

    def range_links(self) -> list[tuple[str, str, bool]]:
        """(label, href, current) for each range."""
        return [(RANGE_LABELS[key], self.url(range=key), key == self.range) for key in RANGES]

    def sorted(self, table: Table[T], rows: Iterable[T]) -> list[T]:
        """``rows`` in the order the query asks for ``table`` (its default order otherwise); unknown values last."""
        column, direction = table.default, table.default_dir
        name, _, col = self.sort.partition(".")
        if name == table.name and col in table.columns:
            column, direction = col, self.dir or table.columns[col][1]
        key = table.columns[column][2]
        known: list[T] = []
        unknown: list[T] = []
        for row in rows:
            (unknown if key(row) is None else known).append(row)
        known.sort(key=key, reverse=direction == "desc")
        return known + unknown

    def header(self, table: Table[Any], column: str) -> Markup:
        """A column header linking to the table sorted by it (the other direction when it is the current sort)."""
        label, first, _ = table.columns[column]
        name, _, col = self.sort.partition(".")
        current = (column, self.dir or first) if name == table.name and col == column else None
        if current is None and not (name == table.name and col in table.columns) and column == table.default:
            current = (column, table.default_dir)
        arrow, direction = "", first
        if current is not None:
            arrow = " ▼" if current[1] == "desc" else " ▲"
            direction = "asc" if current[1] == "desc" else "desc"
        href = self.url(sort=f"{table.name}.{column}", dir=direction)
        return Markup('<a class="sort" href="{0}" title="sort by {1} ({2})">{1}</a>{3}').format(
            href, label, "descending" if direction == "desc" else "ascending", arrow
        )


@dataclass(frozen=True, slots=True)
class Table(Generic[T]):
    """A sortable table: its name in ``?sort=``, and per column (label, first direction, sort key)."""

    name: str
    columns: Mapping[str, tuple[str, str, Callable[[T], Any]]]
    default: str
    default_dir: str = "asc"


def parse(path: str, params: Mapping[str, str], *, tables: Sequence[Table[Any]] = ()) -> PageQuery:
    """The page query of ``params``; :class:`QueryError` for a value the page does not take."""
    span = params.get("range") or None
    if span is not None and span not in RANGES:
        raise QueryError(f"range must be one of {', '.join(RANGES)} (or empty for the page's default).")
    raw_refresh = params.get("refresh") or ""
    try:
        refresh = int(raw_refresh) if raw_refresh else DEFAULT_REFRESH
    except ValueError:
        refresh = -1
    if not 0 <= refresh <= MAX_REFRESH:
        raise QueryError(f"refresh must be whole seconds from 0 (never) to {MAX_REFRESH}.")
    sort, direction = params.get("sort") or "", params.get("dir") or ""
    if sort:
        name, _, col = sort.partition(".")
        table = next((t for t in tables if t.name == name), None)
        if table is None or col not in table.columns:
            known = ", ".join(f"{t.name}.{c}" for t in tables for c in t.columns)
            raise QueryError(f"sort must be one of {known or 'nothing on this page'}.")
    if direction and direction not in DIRECTIONS:
        raise QueryError("dir must be asc or desc.")
    return PageQuery(path, dict(params), span, refresh, sort, direction)
