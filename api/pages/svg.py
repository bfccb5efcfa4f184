"""Inline SVG charts for the pages: pure functions from numbers to markup, so a page needs no script and no
external asset, and each chart can be checked on its own (``tests/api/pages/test_svg.py``).

Every chart is ``<svg class="chart" viewBox="0 0 W H">`` with a ``<title>`` for screen readers; lines are
``<path class="line">``, bars ``<rect class="bar">``, all inside the viewBox. Colours come from the page's CSS
(classes ``s0``..``s3`` and the waterfall categories), so the charts follow the stylesheet.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 48.0, 12.0, 10.0, 22.0


@dataclass(frozen=True, slots=True)
class Series:
    """One line: (x, y) points in x order; a None y breaks the line (a gap, not a zero)."""

    label: str
    points: Sequence[tuple[float, float | None]]
    css: str = "s0"


@dataclass(frozen=True, slots=True)
class Reference:
    """A horizontal dashed line at ``y`` (a baseline, the hardware estimate now)."""

    label: str
    y: float
    css: str = "ref"


@dataclass(frozen=True, slots=True)
class Band:
    """A shaded range over time: (x, low, high) points in x order; a None bound breaks the band (a gap)."""

    label: str
    points: Sequence[tuple[float, float | None, float | None]]
    css: str = "s0"


@dataclass(frozen=True, slots=True)
class Part:
    """One segment of a stacked bar or one row of a bar list."""

    label: str
    value: float
    css: str = "s0"
    note: str = ""  # shown in the tooltip after the value


def _percent(y: float) -> str:
    return f"{y * 100:.3g} %"


def nice_top(largest: float) -> float:
    """The top of a y axis a little above ``largest`` whose quarters are round numbers (0.2 -> 5 %, 10 %, ...)."""
    raw = max(largest, 1e-9) * 1.1
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 4, 8, 10) if m * magnitude >= raw)


#: tick steps in seconds, each with the strftime format its labels need (a day or more: the date too)
_TICK_STEPS = (
    *((s, "%H:%M:%S") for s in (1, 2, 5, 10, 15, 30)),
    *((m * 60, "%H:%M") for m in (1, 2, 5, 10, 15, 30)),
    *((h * 3600, "%H:%M") for h in (1, 2, 3, 6, 12)),
    *((d * 86400, "%d %b") for d in (1, 2, 7, 14, 28)),
)
LABEL_CHAR_WIDTH = 6.6  # px of one character of an 11 px axis label, generously
LABEL_GAP = 14.0


def _label_width(label: str) -> float:
    return len(label) * LABEL_CHAR_WIDTH


def time_ticks(x0: float, x1: float, plot_width: float) -> list[tuple[float, str]]:
    """Round UTC times in ``[x0, x1]`` and their labels, the step the smallest that keeps the labels apart at
    ``plot_width`` px (seconds for a short span, clock time within a day, dates over days; midnight as a date when the
    span is over a day). A span of zero: that one time; no round time inside: the span's two ends."""
    if x1 <= x0:
        return [(x0, time.strftime("%H:%M:%S" if x0 % 60 else "%H:%M", time.gmtime(x0)))]
    span = x1 - x0
    for step, form in _TICK_STEPS:
        ticks = []
        t = math.ceil(x0 / step) * step
        while t <= x1:
            moment = time.gmtime(t)
            midnight = span > 86400 and step < 86400 and moment.tm_hour == moment.tm_min == 0
            ticks.append((float(t), time.strftime("%d %b" if midnight else form, moment)))
            t += step
        widest = max((_label_width(label) for _, label in ticks), default=0.0)
        # 1.5 label widths apart: a label at an edge is shifted inside the plot by up to half its width
        if len(ticks) == 1 or (ticks and step / span * plot_width >= 1.5 * widest + LABEL_GAP):
            return ticks
        if not ticks:
            ends = [(x0, time.strftime(form, time.gmtime(x0))), (x1, time.strftime(form, time.gmtime(x1)))]
            return ends if 2 * _label_width(ends[0][1]) + LABEL_GAP <= plot_width else ends[:1]
    return [(x0, time.strftime("%d %b", time.gmtime(x0))), (x1, time.strftime("%d %b", time.gmtime(x1)))]


def _svg(chart_id: str, title: str, width: float, height: float, body: Sequence[str]) -> Markup:
    head = Markup(
        '<svg class="chart" id="{0}" viewBox="0 0 {1:g} {2:g}" width="{1:g}" height="{2:g}" role="img" '
    ).format(chart_id, width, height)
    head += Markup('aria-label="{0}"><title>{0}</title>').format(title)
    return head + Markup("".join(body)) + Markup("</svg>")


def line_chart(
    chart_id: str,
    title: str,
    series: Sequence[Series],
    *,
    references: Sequence[Reference] = (),
    bands: Sequence[Band] = (),
    y_max: float | None = None,
    width: float = 640,
    height: float = 200,
    y_format: Callable[[float], str] = _percent,
    x_range: tuple[float, float] | None = None,
) -> Markup:
    """Lines over time (x in Unix seconds, labelled as UTC time with ticks chosen for the span), over shaded
    ``bands`` (a range such as a lower and an upper bound); y from 0 to ``y_max`` (the largest value shown, at least a
    little above zero, when not given); x over ``x_range`` (a page's time range) or the points' own span. Dashed
    references are drawn last, over the lines, so a baseline equal to the MFU stays visible."""
    spans = [(x, lo, hi) for b in bands for x, lo, hi in b.points if lo is not None and hi is not None]
    xs = [x for s in series for x, y in s.points if y is not None] + [x for x, _, _ in spans]
    ys = [y for s in series for _, y in s.points if y is not None] + [r.y for r in references]
    ys += [hi for _, _, hi in spans]
    top = y_max if y_max is not None else nice_top(max([*ys, 1e-9]))
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x_range is not None and xs:
        x0, x1 = min(x_range[0], x0), max(x_range[1], x1)
    span = (x1 - x0) or 1.0
    plot_w, plot_h = width - PAD_LEFT - PAD_RIGHT, height - PAD_TOP - PAD_BOTTOM

    def px(x: float) -> float:
        return PAD_LEFT + (plot_w / 2 if x1 == x0 else (x - x0) / span * plot_w)

    def py(y: float) -> float:
        return PAD_TOP + plot_h - min(max(y / top, 0.0), 1.0) * plot_h

    body = []
    for i in range(5):  # gridlines at 0, 1/4 ... of the top
        y = top * i / 4
        body.append(
            Markup('<line class="grid" x1="{0:g}" x2="{1:g}" y1="{2:.1f}" y2="{2:.1f}"/>').format(
                PAD_LEFT, width - PAD_RIGHT, py(y)
            )
        )
        body.append(
            Markup('<text class="axis" x="{0:g}" y="{1:.1f}" text-anchor="end">{2}</text>').format(
                PAD_LEFT - 4, py(y) + 4, y_format(y)
            )
        )
    if xs:
        right = width - PAD_RIGHT
        for x, label in time_ticks(x0, x1, plot_w):
            at, half = px(x), _label_width(label) / 2
            anchor = "middle"
            if at + half > right:  # a tick at the right edge: its label ends there
                at, anchor = right, "end"
            elif at - half < PAD_LEFT:
                at, anchor = PAD_LEFT, "start"
            body.append(
                Markup('<line class="tick" x1="{0:.1f}" x2="{0:.1f}" y1="{1:g}" y2="{2:g}"/>').format(
                    px(x), PAD_TOP + plot_h, PAD_TOP + plot_h + 3
                )
            )
            body.append(
                Markup('<text class="axis time" x="{0:.1f}" y="{1:g}" text-anchor="{2}">{3}</text>').format(
                    at, height - 6, anchor, label
                )
            )
        body.append(
            Markup('<text class="axis" x="{0:g}" y="{1:g}" text-anchor="end">UTC</text>').format(
                PAD_LEFT - 6, height - 6
            )
        )
    for band in bands:
        for run in _runs(band.points):
            upper = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f} {py(hi):.1f}" for i, (x, _, hi) in enumerate(run))
            lower = " ".join(f"L{px(x):.1f} {py(lo):.1f}" for x, lo, _ in reversed(run))
            if len(run) == 1:  # one report: a short vertical bar from its low to its high bound
                upper += " h2"
                lower = f"L{px(run[0][0]) + 2:.1f} {py(run[0][1]):.1f} " + lower
            body.append(
                Markup('<path class="band {0}" d="{1} {2} Z"><title>{3}</title></path>').format(
                    band.css, upper, lower, band.label
                )
            )
    for s in series:
        d, pen_down = [], False
        for px_at, value in s.points:
            if value is None:
                pen_down = False
                continue
            d.append(f"{'L' if pen_down else 'M'}{px(px_at):.1f} {py(value):.1f}")
            pen_down = True
        if not d:
            continue
        if len(d) == 1:  # one point: a short tick, so the line is visible
            d.append("h1")
        body.append(
            Markup('<path class="line {0}" d="{1}"><title>{2}</title></path>').format(s.css, " ".join(d), s.label)
        )
        last_x, last_y = s.points[-1]
        if last_y is not None:  # the newest value, marked
            body.append(
                Markup('<circle class="dot {0}" cx="{1:.1f}" cy="{2:.1f}" r="3"/>').format(
                    s.css, px(last_x), py(last_y)
                )
            )
    for ref in references:  # last: over the lines
        body.append(
            Markup('<path class="{0}" d="M{1:g} {2:.1f}H{3:g}"><title>{4}: {5}</title></path>').format(
                ref.css, PAD_LEFT, py(ref.y), width - PAD_RIGHT, ref.label, y_format(ref.y)
            )
        )
    return _svg(chart_id, title, width, height, body)


def _runs(
    points: Sequence[tuple[float, float | None, float | None]],
) -> list[list[tuple[float, float, float]]]:
    """A band's stretches with both bounds known, split where one is unknown."""
    runs: list[list[tuple[float, float, float]]] = [[]]
    for x, lo, hi in points:
        if lo is None or hi is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((x, lo, hi))
    return [run for run in runs if run]


def stacked_bar(chart_id: str, title: str, parts: Sequence[Part], *, width: float = 640, height: float = 28) -> Markup:
    """One bar split into its parts, each as wide as its share of the total (empty parts are left out)."""
    total = sum(p.value for p in parts if p.value > 0)
    body, x = [], 0.0
    for part in parts:
        if part.value <= 0 or total <= 0:
            continue
        w = part.value / total * width
        share = part.value / total
        body.append(
            Markup(
                '<rect class="bar {0}" x="{1:.2f}" y="0" width="{2:.2f}" height="{3:g}">'
                "<title>{4}: {5:.1f} %{6}</title></rect>"
            ).format(part.css, x, w, height, part.label, share * 100, f" ({part.note})" if part.note else "")
        )
        x += w
    return _svg(chart_id, title, width, height, body)


def bar_list(
    chart_id: str,
    title: str,
    parts: Sequence[Part],
    *,
    x_max: float | None = None,
    width: float = 640,
    row_height: float = 20,
    label_width: float = 140,
    value_format: Callable[[float], str] = _percent,
) -> Markup:
    """One labelled horizontal bar per part, scaled to ``x_max`` (the largest value when not given)."""
    top = x_max if x_max is not None else max([p.value for p in parts] + [1e-9])
    bar_w = width - label_width - 70
    body = []
    for i, part in enumerate(parts):
        y = i * row_height
        w = max(min(part.value / top, 1.0), 0.0) * bar_w if top > 0 else 0.0
        body.append(
            Markup('<text class="label" x="{0:g}" y="{1:.1f}" text-anchor="end">{2}</text>').format(
                label_width - 6, y + row_height * 0.7, part.label
            )
        )
        body.append(
            Markup(
                '<rect class="bar {0}" x="{1:g}" y="{2:.1f}" width="{3:.2f}" height="{4:.1f}">'
                "<title>{5}: {6}{7}</title></rect>"
            ).format(
                part.css,
                label_width,
                y + 2,
                max(w, 0.5),
                row_height - 4,
                part.label,
                value_format(part.value),
                f" ({part.note})" if part.note else "",
            )
        )
        body.append(
            Markup('<text class="value" x="{0:.1f}" y="{1:.1f}">{2}</text>').format(
                label_width + max(w, 0.5) + 4, y + row_height * 0.7, value_format(part.value)
            )
        )
    return _svg(chart_id, title, width, max(len(parts), 1) * row_height, body)


__all__ = ["Band", "Part", "Reference", "Series", "bar_list", "line_chart", "nice_top", "stacked_bar", "time_ticks"]
