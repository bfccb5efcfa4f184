"""``mfumon report --chargeback --since 30d --format csv|json|markdown``: the aggregator's chargeback of a window
(``GET /v1/chargeback``, read over HTTP like the rest of the report), for a spreadsheet, a script or a message.

- ``json``: the API's answer as it is (indented): ``currency``, ``priced``, ``fleet``, ``rows``, ``pools``, ``jobs``.
- ``csv``: one header line (:data:`CSV_COLUMNS`), then a line per row of the API's ``rows`` (``team`` per team,
  ``no_team``, ``idle``, ``unreported``), a line per job (``job``) and the ``fleet`` line last. The non-job lines add
  up to the fleet's; the job lines split the team and no-team lines job by job, so a sum over the whole file counts
  those twice. A cost no price covers is an empty cell, never 0; so are a per-token figure without tokens and
  tokens where none were counted.
- ``markdown``: the rows and the fleet as one table.

Costs are the aggregator's (its price list: ``PUT /v1/prices`` or ``MFUMON_PRICES_FILE``), not ``--price``.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from mfumon.exporter.ops.markdown import table
from mfumon.exporter.ops.report import ReportError, _detail
from mfumon.exporter.ops.text import BLANK, hours, when

#: What ``GET /v1/chargeback`` takes for ``since`` and ``until`` (the aggregator's ``TIME_PATTERN``, which the
#: report cannot import): Unix seconds, or a duration back from now of at most 6 digits and one of s, m, h, d, w.
TIME_PATTERN = r"^(?:[0-9]{1,11}(?:\.[0-9]{1,6})?|[0-9]{1,6}(?:\.[0-9]{1,6})?[smhdw])$"
_TIME = re.compile(TIME_PATTERN.removesuffix("$") + r"\Z")
DEFAULT_SINCE = "30d"
FORMATS = ("csv", "json", "markdown")
CSV_COLUMNS = (
    "row",
    "name",
    "team",
    "gpu_hours",
    "cost",
    "currency",
    "unpriced_gpu_hours",
    "energy_kwh",
    "tokens",
    "cost_per_million_tokens",
    "joules_per_token",
)
JOULES_PER_KWH = 3.6e6
_LABELS = {"no_team": "jobs without a team", "idle": "idle capacity", "unreported": "unreported busy GPUs"}


def time_problem(value: str, flag: str) -> str | None:
    """Why ``value`` is not a window bound the aggregator takes, or None."""
    if _TIME.match(value):
        return None
    return f"{flag} {value!r}: give Unix seconds or a duration back from now (30d, 24h, 90m, 1w; at most 6 digits)"


def fetch_chargeback(client: httpx.Client, *, since: str, until: str | None = None) -> dict[str, Any]:
    """``GET /v1/chargeback`` of the window; :class:`ReportError` when the aggregator cannot answer it."""
    params = {"since": since} | ({"until": until} if until else {})
    try:
        response = client.get("/v1/chargeback", params=params)
    except httpx.HTTPError as exc:
        raise ReportError(f"cannot reach the aggregator at {client.base_url}: {exc}") from None
    if response.status_code in (401, 403):
        raise ReportError(
            f"GET /v1/chargeback: {response.status_code}: this aggregator needs a token with the 'read' scope"
        )
    if response.status_code == 404:
        raise ReportError("GET /v1/chargeback: 404: this aggregator is older than the chargeback (no such endpoint)")
    if response.status_code >= 400:
        raise ReportError(f"GET /v1/chargeback: {response.status_code}: {_detail(response)}")
    try:
        data = response.json()
    except ValueError:
        raise ReportError("GET /v1/chargeback: the answer is not JSON") from None
    if not isinstance(data, dict) or not {"fleet", "rows", "jobs"} <= data.keys():
        raise ReportError("GET /v1/chargeback: the answer has no fleet, rows and jobs")
    return data


def render_json(data: Mapping[str, Any]) -> str:
    """The API's answer as it is."""
    return json.dumps(data, indent=2) + "\n"


def _number(value: float | None, digits: int = 6) -> str:
    """A plain decimal (no exponent, no thousands separator), or empty for an unknown value."""
    if value is None:
        return ""
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _line(kind: str, name: str | None, team: str | None, item: Mapping[str, Any], currency: str) -> list[str]:
    joules = float(item.get("energy_joules") or 0.0)
    return [
        kind,
        name or "",
        team or "",
        _number(float(item["gpu_seconds"]) / 3600.0),
        _number(item.get("cost")),
        currency,
        _number(float(item.get("unpriced_gpu_seconds") or 0.0) / 3600.0),
        _number(joules / JOULES_PER_KWH),
        _number(item.get("tokens"), 0),
        _number(item.get("cost_per_million_tokens")),
        _number(item.get("joules_per_token")),
    ]


def csv_lines(data: Mapping[str, Any]) -> Iterator[list[str]]:
    """The CSV's lines after the header: the rows, the jobs, then the fleet."""
    currency = str(data.get("currency") or "")
    for row in data["rows"]:
        kind = str(row["kind"])
        yield _line(kind, row.get("name"), row.get("name") if kind == "team" else None, row, currency)
    for job in data["jobs"]:
        yield _line("job", job["job_id"], job.get("team"), job, currency)
    yield _line("fleet", None, None, data["fleet"], currency)


def render_csv(data: Mapping[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_lines(data))
    return out.getvalue()


def _money(value: float | None, currency: str) -> str:
    if value is None:
        return "unpriced"
    return f"{value:,.2f} {currency}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g} {currency}"


def _per(value: float | None, unit: str) -> str:
    return BLANK if value is None else f"{value:.3g} {unit}"


def render_markdown(data: Mapping[str, Any], url: str) -> str:
    """The rows and the fleet as one table, with the window and whether prices are set."""
    currency = str(data.get("currency") or "")

    def cells(label: str, item: Mapping[str, Any]) -> list[str]:
        cost_per_mtok = item.get("cost_per_million_tokens")
        return [
            label,
            hours(float(item["gpu_seconds"]) / 3600.0),
            _money(item.get("cost"), currency),
            hours(float(item.get("unpriced_gpu_seconds") or 0.0) / 3600.0),
            f"{float(item.get('energy_joules') or 0.0) / JOULES_PER_KWH:,.2f}",
            "unpriced" if item.get("cost") is None else _money(cost_per_mtok, currency) if cost_per_mtok else BLANK,
            _per(item.get("joules_per_token"), "J"),
        ]

    rows = [cells(str(r.get("name")) if r["kind"] == "team" else _LABELS[r["kind"]], r) for r in data["rows"]]
    rows.append(cells("**fleet**", data["fleet"]))
    header = ["who", "GPU-hours", "cost", "unpriced GPU-hours", "energy kWh", "per million tokens", "per token"]
    out = [f"# Chargeback: {when(float(data['since']))} to {when(float(data['until']))}", ""]
    out.append(f"Aggregator {url.rstrip('/')}; costs in {currency}.")
    if not data.get("priced"):
        out.append("No price list is set there: costs are unpriced (PUT /v1/prices or MFUMON_PRICES_FILE).")
    out += ["", *table(header, rows, "lrrrrrr"), ""]
    out.append(
        f"The rows add up to the fleet. {len(data['jobs'])} job(s) in the window: `--format csv` lists each, "
        "`--format json` gives the API's answer."
    )
    return "\n".join(out) + "\n"
