"""Inline SVG charts for the HTML report: horizontal stacked bars, drawn by hand so the page needs no script, font
or stylesheet from anywhere (it is mailed, archived and opened offline)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from mfumon.exporter.ops.text import hours

#: Waterfall categories keep one colour everywhere (compute green, waits warm, idle grey).
COLOURS: dict[str, str] = {
    "compute": "#2e7d32",
    "comm_exposed": "#1565c0",
    "data_wait": "#f9a825",
    "bubble": "#8e24aa",
    "init": "#6d4c41",
    "checkpoint": "#00838f",
    "eval": "#5c6bc0",
    "lost": "#c62828",
    "stalled": "#ef6c00",
    "idle": "#9e9e9e",
    "unreported": "#cfd8dc",
}
_SPARE = ("#ad1457", "#558b2f", "#4e342e", "#283593", "#00695c")

Row = tuple[str, Sequence[tuple[str, float]]]  # a bar's label and its (category, value) segments


def colour(category: str) -> str:
    return COLOURS.get(category) or _SPARE[sum(map(ord, category)) % len(_SPARE)]


def stacked_bars(
    chart_id: str, title: str, rows: Sequence[Row], *, normalize: bool, unit: str = "", width: int = 760
) -> str:
    """One bar per row, its segments stacked left to right; ``normalize``: each bar shows shares of its own total
    (pools of different sizes side by side), else lengths are to scale with the largest bar."""
    label_w, bar_h, gap, top = 170, 18, 8, 26
    plot_w = width - label_w - 90
    shown = {c for _, segments in rows for c, v in segments if v > 0}
    categories = [c for c in dict.fromkeys(c for _, segments in rows for c, _ in segments) if c in shown]
    legend_rows = (len(categories) + 5) // 6
    height = top + len(rows) * (bar_h + gap) + 12 + legend_rows * 18
    largest = max((sum(v for _, v in segments) for _, segments in rows), default=0.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="0" y="16" class="chart-title">{escape(title)}</text>',
    ]
    for i, (label, segments) in enumerate(rows):
        y = top + i * (bar_h + gap)
        total = sum(v for _, v in segments if v > 0)
        scale = (1.0 / total if total > 0 else 0.0) if normalize else (1.0 / largest if largest > 0 else 0.0)
        parts.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">{escape(label[:28])}</text>')
        x = float(label_w)
        for category, value in segments:
            if value <= 0:
                continue
            w = value * scale * plot_w
            share = value / total if total > 0 else 0.0
            parts.append(
                f'<rect class="bar" data-category="{escape(category)}" x="{x:.1f}" y="{y}" width="{w:.1f}" '
                f'height="{bar_h}" fill="{colour(category)}"><title>{escape(label)}: {escape(category)} '
                f"{value:,.1f}{escape(unit)} ({100 * share:.1f}%)</title></rect>"
            )
            x += w
        figure = "100%" if normalize and total > 0 else f"{hours(total)}{unit}"
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 13}" class="value">{escape(figure)}</text>')
    y = top + len(rows) * (bar_h + gap) + 8
    for k, category in enumerate(categories):
        lx, ly = (k % 6) * 125, y + (k // 6) * 18
        parts.append(f'<rect x="{lx}" y="{ly}" width="11" height="11" fill="{colour(category)}"/>')
        parts.append(f'<text x="{lx + 15}" y="{ly + 10}" class="legend">{escape(category)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
