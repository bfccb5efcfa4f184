"""``mfumon report --format markdown``: the window as Markdown tables (a wiki page, a chat message, an email)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mfumon.exporter.links import cluster_page_url, job_page_url
from mfumon.exporter.ops import software
from mfumon.exporter.ops.remediation import Remediation, summary_line
from mfumon.exporter.ops.report import COMPUTE, Group, JobLine, Report
from mfumon.exporter.ops.text import (
    BLANK,
    SERVING_NOTE,
    hours,
    money,
    name,
    pct,
    serving_columns,
    wasters_title,
    when,
)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    """A pipe table; ``align`` gives each column's alignment (``l``/``r``), left by default."""
    marks = ["---:" if align[i : i + 1] == "r" else "---" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return out


def _job(report: Report, job_id: str) -> str:
    """The job's id, linked to its page on the aggregator."""
    return f"[`{job_id}`]({job_page_url(report.url, job_id)})"


def _waste(item: tuple[str, float] | None) -> str:
    return BLANK if item is None else f"{item[0]} ({hours(item[1])} h)"


def _groups(report: Report, groups: Sequence[Group], title: str) -> list[str]:
    if not groups:
        return [f"No {title.lower()} in this window.", ""]
    cost = report.currency is not None
    header = [title[:-1].lower(), "GPU-hours", "MFU", "goodput", "biggest waste"] + (["cost"] if cost else [])
    rows = [
        [name(g.name), hours(g.gpu_hours), pct(g.mfu), pct(g.goodput), _waste(g.biggest_waste)]
        + ([money(g.cost, report.currency)] if cost else [])
        for g in groups
    ]
    return [*table(header, rows, "lrrrl" + "r"), ""]


def _waterfalls(groups: Sequence[Group], first: str) -> list[str]:
    """Each group's waterfall as shares of its GPU-hours, one column per category."""
    categories = list(dict.fromkeys(c for g in groups for c, _ in g.waterfall))
    rows = [[name(g.name, "cluster"), *(pct(g.share(c)) for c in categories)] for g in groups]
    return [*table([first, *categories], rows, "l" + "r" * len(categories)), ""]


def _jobs(report: Report, jobs: Sequence[JobLine]) -> list[str]:
    cost = report.currency is not None
    header = ["job", "team", "pool", "GPU-hours", "wasted", "biggest waste", "goodput", "MFU"]
    header += ["cost of waste"] if cost else []
    rows = [
        [
            _job(report, j.job_id),
            name(j.team, ""),
            name(j.pool, ""),
            hours(j.gpu_hours),
            f"{hours(j.wasted_gpu_hours)} h",
            _waste(j.biggest_waste),
            pct(j.goodput),
            pct(j.mfu),
        ]
        + ([money(j.wasted_cost, report.currency)] if cost else [])
        for j in jobs
    ]
    return table(header, rows, "lllrrlrrr")


def render_markdown(report: Report) -> str:
    c = report.cluster
    out = [
        f"# GPU-hours report: {when(report.since)} to {when(report.until)}",
        "",
        f"Aggregator {report.url} ([cluster page]({cluster_page_url(report.url)})), generated "
        f"{when(report.generated_at)}. {report.jobs_in_window} jobs ran in the window; each job links to its page.",
        "",
        "## Cluster",
        "",
        f"- **{hours(c.gpu_hours)} GPU-hours** ({hours(c.hours(COMPUTE))} computing), MFU **{pct(c.mfu)}**, "
        f"goodput **{pct(c.goodput)}**",
        f"- Jobs ended: {_ends(report)}",
    ]
    if report.currency is not None:
        out.append(f"- Cost: **{money(c.cost, report.currency)}**")
        if report.unpriced:
            out.append(f"- No price for {', '.join(report.unpriced)}: their costs are left out ({BLANK}).")
    out += ["", "### Where the GPU-hours went", ""]
    share = [(cat, h) for cat, h in c.waterfall]
    out += table(
        ["category", "GPU-hours", "share"],
        [[cat, hours(h), pct(h / c.gpu_hours if c.gpu_hours else None)] for cat, h in share],
        "lrr",
    )
    out += ["", "## Pools", "", *_groups(report, report.pools, "Pools")]
    if report.pools:
        out += _waterfalls(report.pools, "pool")
    out += ["## Teams", "", *_groups(report, report.teams, "Teams")]
    if report.teams:
        out += _waterfalls(report.teams, "team")
    out += [f"## {wasters_title(len(report.top_wasters))}", ""]
    out += (_jobs(report, report.top_wasters) if report.top_wasters else ["No job wasted GPU-hours."]) + [""]
    out += [f"## Jobs below baseline (MFU under {pct(report.below_baseline_threshold)} of their workload's)", ""]
    if report.below_baseline:
        rows = [
            [_job(report, j.job_id), name(j.team, ""), pct(j.mfu), pct(j.baseline_mfu), pct(j.vs_baseline), j.status]
            for j in report.below_baseline
        ]
        out += table(["job", "team", "MFU", "baseline", "of baseline", "status"], rows, "llrrrl")
    else:
        out.append("None.")
    if report.serving:
        out += ["", *_serving(report)]
    out += ["", "## Failures", "", f"Jobs ended in failure: **{report.failures}** ({_ends(report)})."]
    if report.failed_jobs:
        out.append("")
        rows = [
            [
                _job(report, j.job_id),
                name(j.team, ""),
                str(j.failures),
                str(j.restarts),
                name(j.outcome, "running"),
                BLANK if j.exit_code is None else str(j.exit_code),
                f"{hours(j.hours('lost'))} h",
            ]
            for j in report.failed_jobs
        ]
        out += table(["job", "team", "failures", "restarts", "outcome", "exit code", "lost"], rows, "llrrlrr")
    if report.remediation is not None:
        out += ["", *_remediation(report.remediation)]
    if report.software is not None:
        out += ["", "## Software changes", "", report.software.summary]
        if report.software.changes:
            out += ["", *table(software.HEADER, software.rows(report.software), "lllrrrrrl")]
    return "\n".join(out) + "\n"


def _serving(report: Report) -> list[str]:
    """Serving jobs: SLO goodput (as bounds) and where their GPU-hours went."""
    rows = [[_job(report, cells[0]), *cells[1:]] for cells in (line.cells() for line in report.serving)]
    return ["## Serving jobs", "", SERVING_NOTE, "", *table(serving_columns(), rows, "lllrllrlrrr")]


def _remediation(section: Remediation) -> list[str]:
    out = ["## Remediation", "", summary_line(section)]
    if section.empty:
        return out
    out += ["", *table(["action", "outcome", "decisions"], [[a, o, str(n)] for a, o, n in section.actions], "llr")]
    if section.withheld:
        rows = [[rail, str(n), str(rounds)] for rail, n, rounds in section.withheld]
        out += ["", "Withheld by a safety rail:", "", *table(["rail", "decisions", "rounds"], rows, "lrr")]
    return out


def _ends(report: Report) -> str:
    parts = [f"{kind}: " + ", ".join(f"{n} {o}" for o, n in outcomes.items()) for kind, outcomes in report.ends.items()]
    return "; ".join(parts) if parts else "none"
