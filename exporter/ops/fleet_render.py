"""The fleet report as Markdown or one self-contained HTML page: the clusters side by side with a fleet row, waste by
cause per cluster, the fleet's top wasters, then each cluster's own report; clusters that did not answer come first."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from mfumon.exporter.ops.fleet import FleetReport
from mfumon.exporter.ops.html import CSS
from mfumon.exporter.ops.html import table as html_table
from mfumon.exporter.ops.markdown import render_markdown
from mfumon.exporter.ops.markdown import table as md_table
from mfumon.exporter.ops.report import Group
from mfumon.exporter.ops.text import BLANK, hours, money, name, pct, when


def _title(fleet: FleetReport) -> str:
    return f"Fleet GPU-hours report: {when(fleet.since)} to {when(fleet.until)}"


def _answered_line(fleet: FleetReport) -> str:
    return f"{len(fleet.clusters)} of {fleet.asked} clusters answered; generated {when(fleet.generated_at)}."


def _groups(fleet: FleetReport) -> list[tuple[str, Group]]:
    return [*((n, r.cluster) for n, r in fleet.clusters), ("fleet", fleet.fleet)]


def _summary_rows(fleet: FleetReport) -> tuple[list[str], list[list[str]]]:
    cost = fleet.currency is not None
    header = ["cluster", "GPU-hours", "MFU", "goodput", "biggest waste"] + (["cost"] if cost else [])
    rows = []
    for cluster, g in _groups(fleet):
        waste = g.biggest_waste
        row = [cluster, hours(g.gpu_hours), pct(g.mfu), pct(g.goodput)]
        row.append(BLANK if waste is None else f"{waste[0]} ({hours(waste[1])} h)")
        rows.append(row + ([money(g.cost, fleet.currency)] if cost else []))
    return header, rows


def _waste_rows(fleet: FleetReport) -> tuple[list[str], list[list[str]]]:
    """GPU-hours by waterfall category, per cluster and for the fleet."""
    groups = _groups(fleet)
    categories = list(dict.fromkeys(c for _, g in groups for c, _ in g.waterfall))
    rows = [[cluster, *(hours(g.hours(c)) for c in categories)] for cluster, g in groups]
    return ["cluster", *categories], rows


def _waster_rows(fleet: FleetReport) -> tuple[list[str], list[list[str]]]:
    cost = fleet.currency is not None
    header = ["cluster", "job", "team", "pool", "GPU-hours", "wasted", "goodput", "MFU"]
    rows = [
        [
            w.cluster,
            w.job.job_id,
            name(w.job.team, ""),
            name(w.job.pool, ""),
            hours(w.job.gpu_hours),
            f"{hours(w.job.wasted_gpu_hours)} h",
            pct(w.job.goodput),
            pct(w.job.mfu),
        ]
        + ([money(w.job.wasted_cost, fleet.currency)] if cost else [])
        for w in fleet.top_wasters
    ]
    return header + (["cost of waste"] if cost else []), rows


def _bold_last(rows: Sequence[list[str]], opening: str, closing: str) -> list[list[str]]:
    """The fleet row (the last) in bold."""
    return [*rows[:-1], [f"{opening}{cell}{closing}" for cell in rows[-1]]]


def render_fleet_markdown(fleet: FleetReport) -> str:
    out = [f"# {_title(fleet)}", "", _answered_line(fleet), ""]
    for miss in fleet.unanswered:
        out.append(f"- **Not answering: {miss.name}** ({miss.url}): {miss.error}. Its figures are missing below.")
    if fleet.unanswered:
        out.append("")
    header, rows = _summary_rows(fleet)
    out += ["## Clusters and fleet", "", *md_table(header, _bold_last(rows, "**", "**"), "lrrrlr"), ""]
    header, rows = _waste_rows(fleet)
    out += ["## GPU-hours by cause", "", *md_table(header, _bold_last(rows, "**", "**"), "l" + "r" * len(header)), ""]
    header, rows = _waster_rows(fleet)
    out += ["## Top wasters across the fleet", ""]
    out += [*md_table(header, rows, "llllrrrrr"), ""] if rows else ["No job wasted GPU-hours.", ""]
    for cluster, report in fleet.clusters:
        body = render_markdown(report).splitlines()
        out += [f"## Cluster {cluster}", ""]
        out += ["#" + line if line.startswith("#") else line for line in body[1:]]  # its own title is the heading
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def render_fleet_html(fleet: FleetReport) -> str:
    title = _title(fleet)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{escape(_answered_line(fleet))}</p>',
    ]
    for miss in fleet.unanswered:
        out.append(
            f"<p><b>Not answering: {escape(miss.name)}</b> ({escape(miss.url)}): {escape(miss.error)}. "
            "Its figures are missing below.</p>"
        )
    for heading, (header, rows), numeric in (
        ("Clusters and fleet", _summary_rows(fleet), "-nnn-n"),
        ("GPU-hours by cause", _waste_rows(fleet), "-" + "n" * 20),
    ):
        cells = [[escape(c) for c in r] for r in rows]
        out += [f"<h2>{heading}</h2>", html_table(header, _bold_last(cells, "<b>", "</b>"), numeric)]
    header, rows = _waster_rows(fleet)
    out.append("<h2>Top wasters across the fleet</h2>")
    cells = [[escape(c) for c in r] for r in rows]
    out.append(html_table(header, cells, "----nnnnn") if rows else "<p>No job wasted GPU-hours.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
