"""``mfumon report --format html``: one self-contained page (inline CSS and SVG charts, no script, nothing
fetched), for a mail attachment or a wiki upload."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from mfumon.exporter.links import cluster_page_url, job_page_url
from mfumon.exporter.ops import software
from mfumon.exporter.ops.remediation import Remediation, summary_line
from mfumon.exporter.ops.report import COMPUTE, Group, Report
from mfumon.exporter.ops.svg import stacked_bars
from mfumon.exporter.ops.text import BLANK, SERVING_NOTE, hours, money, name, pct, serving_columns, wasters_title, when

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2327;margin:2em auto;max-width:980px}
h1{font-size:22px}h2{font-size:18px;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0}td,th{padding:3px 9px;border-bottom:1px solid #eee;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.kpi{display:flex;gap:1.2em;flex-wrap:wrap}
.kpi div{background:#f4f6f8;border-radius:6px;padding:.6em 1em}.kpi b{display:block;font-size:20px}
svg.chart{display:block;margin:.8em 0;font-size:12px}svg .chart-title{font-weight:600;font-size:13px}
svg .legend,svg .value{fill:#444}code{font-size:13px}.muted{color:#666}
"""


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: str = "") -> str:
    """Cells are already escaped; ``numeric`` marks right-aligned columns with ``n``."""

    def cls(i: int) -> str:
        return ' class="n"' if numeric[i : i + 1] == "n" else ""

    head = "".join(f"<th{cls(i)}>{escape(h)}</th>" for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _waste(item: tuple[str, float] | None) -> str:
    return BLANK if item is None else f"{escape(item[0])} ({hours(item[1])} h)"


def _groups(report: Report, groups: Sequence[Group], kind: str) -> str:
    if not groups:
        return f"<p>No {kind}s in this window.</p>"
    cost = report.currency is not None
    rows = [
        [escape(name(g.name)), hours(g.gpu_hours), pct(g.mfu), pct(g.goodput), _waste(g.biggest_waste)]
        + ([money(g.cost, report.currency)] if cost else [])
        for g in groups
    ]
    grid = table([kind, "GPU-hours", "MFU", "goodput", "biggest waste"] + (["cost"] if cost else []), rows, "-nnn-n")
    chart = stacked_bars(
        f"chart-{kind}s",
        f"Where each {kind}'s GPU-hours went (share of its GPU-hours)",
        [(name(g.name), g.waterfall) for g in groups],
        normalize=True,
    )
    return grid + chart


def _job(report: Report, job_id: str) -> str:
    """The job's id, linked to its page on the aggregator."""
    return f'<a href="{escape(job_page_url(report.url, job_id))}">{_code(job_id)}</a>'


def _code(text: str) -> str:
    return f"<code>{escape(text)}</code>"


def render_html(report: Report) -> str:
    c = report.cluster
    kpis = [
        ("GPU-hours", hours(c.gpu_hours)),
        ("computing", hours(c.hours(COMPUTE))),
        ("MFU", pct(c.mfu)),
        ("goodput", pct(c.goodput)),
        ("jobs failed", str(report.failures)),
    ]
    if report.currency is not None:
        kpis.append(("cost", money(c.cost, report.currency)))
    title = f"GPU-hours report: {when(report.since)} to {when(report.until)}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">Aggregator {escape(report.url)} (<a href="{escape(cluster_page_url(report.url))}">its '
        f"cluster page</a>), generated {when(report.generated_at)}; {report.jobs_in_window} jobs ran in the window; "
        "each job links to its page.</p>",
        '<div class="kpi">' + "".join(f"<div>{escape(k)}<b>{escape(v)}</b></div>" for k, v in kpis) + "</div>",
    ]
    if report.unpriced:
        out.append(f"<p>No price for {escape(', '.join(report.unpriced))}: their costs are left out ({BLANK}).</p>")
    out += [
        "<h2>Where the cluster's GPU-hours went</h2>",
        stacked_bars(
            "chart-cluster", "Cluster waterfall (GPU-hours)", [("cluster", c.waterfall)], normalize=False, unit=" h"
        ),
        table(
            ["category", "GPU-hours", "share"],
            [[escape(cat), hours(h), pct(h / c.gpu_hours if c.gpu_hours else None)] for cat, h in c.waterfall],
            "-nn",
        ),
        "<h2>Pools</h2>",
        _groups(report, report.pools, "pool"),
        "<h2>Teams</h2>",
        _groups(report, report.teams, "team"),
        f"<h2>{wasters_title(len(report.top_wasters))}</h2>",
    ]
    if report.top_wasters:
        cost = report.currency is not None
        rows = [
            [
                _job(report, j.job_id),
                escape(name(j.team, "")),
                escape(name(j.pool, "")),
                hours(j.gpu_hours),
                hours(j.wasted_gpu_hours),
                _waste(j.biggest_waste),
                pct(j.goodput),
                pct(j.mfu),
            ]
            + ([money(j.wasted_cost, report.currency)] if cost else [])
            for j in report.top_wasters
        ]
        header = ["job", "team", "pool", "GPU-hours", "wasted", "biggest waste", "goodput", "MFU"]
        out.append(table(header + (["cost of waste"] if cost else []), rows, "---nn-nnn"))
        out.append(
            stacked_bars(
                "chart-wasters",
                "Wasted GPU-hours by cause",
                [(j.job_id, [(cat, h) for cat, h in j.waterfall if cat != COMPUTE]) for j in report.top_wasters],
                normalize=False,
                unit=" h",
            )
        )
    else:
        out.append("<p>No job wasted GPU-hours.</p>")
    out.append(f"<h2>Jobs below baseline (MFU under {pct(report.below_baseline_threshold)} of their workload's)</h2>")
    if report.below_baseline:
        rows = [
            [
                _job(report, j.job_id),
                escape(name(j.team, "")),
                pct(j.mfu),
                pct(j.baseline_mfu),
                pct(j.vs_baseline),
                escape(j.status),
            ]
            for j in report.below_baseline
        ]
        out.append(table(["job", "team", "MFU", "baseline", "of baseline", "status"], rows, "--nnn-"))
    else:
        out.append("<p>None.</p>")
    ends = "; ".join(
        f"{escape(kind)}: " + ", ".join(f"{n} {escape(o)}" for o, n in outcomes.items())
        for kind, outcomes in report.ends.items()
    )
    if report.serving:
        rows = [
            [_job(report, cells[0]), *(escape(c) for c in cells[1:])] for cells in (s.cells() for s in report.serving)
        ]
        out += [
            "<h2>Serving jobs</h2>",
            f"<p>{escape(SERVING_NOTE)}</p>",
            table(serving_columns(), rows, "---n--n-nnn"),
        ]
    out += ["<h2>Failures</h2>", f"<p>Jobs ended in failure: <b>{report.failures}</b> ({ends or 'no job ended'}).</p>"]
    if report.failed_jobs:
        rows = [
            [
                _job(report, j.job_id),
                escape(name(j.team, "")),
                str(j.failures),
                str(j.restarts),
                escape(name(j.outcome, "running")),
                BLANK if j.exit_code is None else str(j.exit_code),
                hours(j.hours("lost")),
            ]
            for j in report.failed_jobs
        ]
        out.append(
            table(["job", "team", "failures", "restarts", "outcome", "exit code", "lost GPU-hours"], rows, "--nn-nn")
        )
    if report.remediation is not None:
        out += _remediation(report.remediation)
    if report.software is not None:
        out += ["<h2>Software changes</h2>", f"<p>{escape(report.software.summary)}</p>"]
        if report.software.changes:
            cells = [[escape(cell) for cell in row] for row in software.rows(report.software)]
            out.append(table(software.HEADER, cells, "---nnnnn-"))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _remediation(section: Remediation) -> list[str]:
    out = ["<h2>Remediation</h2>", f"<p>{escape(summary_line(section))}</p>"]
    if section.empty:
        return out
    rows = [[escape(a), escape(o), str(n)] for a, o, n in section.actions]
    out.append(table(["action", "outcome", "decisions"], rows, "--n"))
    if section.withheld:
        rows = [[escape(rail), str(n), str(rounds)] for rail, n, rounds in section.withheld]
        out += ["<p>Withheld by a safety rail:</p>", table(["rail", "decisions", "rounds"], rows, "-nn")]
    return out
