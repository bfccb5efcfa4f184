"""The SVG chart helpers: every mark inside the viewBox, gaps for unknown values, labels escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from itertools import pairwise

import pytest

from mfumon.api.pages.svg import (
    LABEL_CHAR_WIDTH,
    Band,
    Part,
    Reference,
    Series,
    bar_list,
    line_chart,
    nice_top,
    stacked_bar,
    time_ticks,
)

NS = "{http://www.w3.org/2000/svg}"


def _parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup).replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def _view_box(svg: ET.Element) -> tuple[float, float]:
    _, _, w, h = (float(v) for v in svg.get("viewBox", "").split())
    return w, h


def _path_points(d: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"[ML]([-\d.]+) ([-\d.]+)", d)]


def test_a_line_stays_inside_its_view_box_and_breaks_at_unknown_values() -> None:
    points = [(1000.0, 0.30), (1030.0, 0.35), (1060.0, None), (1090.0, 0.40), (1120.0, 0.42)]
    svg = _parse(line_chart("c", "MFU", [Series("MFU", points)], references=[Reference("baseline", 0.5)]))
    w, h = _view_box(svg)
    line = next(p for p in svg.iter(f"{NS}path") if "line" in p.get("class", ""))
    d = line.get("d", "")
    assert d.count("M") == 2  # the None starts a new segment instead of dropping to zero
    xy = _path_points(d)
    assert len(xy) == 4 and all(0 <= x <= w and 0 <= y <= h for x, y in xy)
    assert xy[0][0] < xy[-1][0] and xy[-1][1] < xy[0][1]  # time goes right, a higher MFU is higher up
    ref = next(p for p in svg.iter(f"{NS}path") if "ref" in p.get("class", ""))
    ref_y = _path_points(ref.get("d", "").replace("H", " H"))[0][1]
    assert ref_y < xy[-1][1]  # the baseline (0.5) is above every point (at most 0.42)


def test_one_point_still_draws_a_visible_mark() -> None:
    svg = _parse(line_chart("c", "MFU", [Series("MFU", [(5.0, 0.2)])]))
    line = next(p for p in svg.iter(f"{NS}path") if "line" in p.get("class", ""))
    assert "h1" in line.get("d", "") and list(svg.iter(f"{NS}circle"))


def test_stacked_bar_widths_are_shares_of_the_width_and_skip_empty_parts() -> None:
    parts = [Part("compute", 300.0, "wf-compute"), Part("idle", 0.0, "wf-idle"), Part("comm", 100.0, "wf-comm")]
    svg = _parse(stacked_bar("b", "Waterfall", parts, width=400))
    rects = list(svg.iter(f"{NS}rect"))
    assert [r.get("class") for r in rects] == ["bar wf-compute", "bar wf-comm"]
    assert [float(r.get("width", 0)) for r in rects] == [300.0, 100.0]
    assert float(rects[1].get("x", 0)) == 300.0
    assert "75.0 %" in (rects[0].findtext(f"{NS}title") or "")


def test_an_empty_stacked_bar_has_no_marks() -> None:
    assert list(_parse(stacked_bar("b", "x", [Part("a", 0.0)])).iter(f"{NS}rect")) == []


def test_bar_list_scales_to_x_max_and_escapes_labels() -> None:
    parts = [Part("<gpu 0>", 0.25), Part("gpu 1", 1.0), Part("gpu 2", 1.5)]
    markup = bar_list("t", "Tensor", parts, x_max=1.0, width=640, label_width=140)
    assert "<gpu 0>" not in markup and "&lt;gpu 0&gt;" in markup
    svg = _parse(markup)
    w, _ = _view_box(svg)
    widths = [float(r.get("width", 0)) for r in svg.iter(f"{NS}rect")]
    assert widths[0] == widths[1] / 4 and widths[2] == widths[1]  # clipped at x_max
    assert all(140 + width <= w for width in widths)


def test_the_y_axis_tops_at_a_round_number_above_the_data() -> None:
    assert [nice_top(v) for v in (0.12, 0.42, 0.5, 0.9, 3.0e15)] == [0.2, 0.8, 0.8, 1.0, 4.0e15]
    svg = line_chart("c", "MFU", [Series("MFU", [(0.0, 0.12), (1.0, 0.15)])])
    assert [t for t in re.findall(r">([\d.]+ %)<", str(svg))] == ["0 %", "5 %", "10 %", "15 %", "20 %"]


def test_a_band_fills_between_its_bounds_and_breaks_where_one_is_unknown() -> None:
    points = [(0.0, 0.80, 0.90), (10.0, 0.85, 0.95), (20.0, None, 0.9), (30.0, 0.7, 0.8), (40.0, 0.75, 0.85)]
    svg = _parse(
        line_chart(
            "g", "goodput", [Series("lower", [(x, lo) for x, lo, _ in points])], bands=[Band("met", points)], y_max=1.0
        )
    )
    w, h = _view_box(svg)
    bands = [p for p in svg.iter(f"{NS}path") if "band" in p.get("class", "")]
    assert len(bands) == 2  # the unknown bound splits it
    for band in bands:
        d = band.get("d", "")
        assert d.endswith("Z") and d.count("M") == 1
        xy = _path_points(d)
        assert len(xy) == 4 and all(0 <= x <= w and 0 <= y <= h for x, y in xy)
        upper, lower = xy[:2], xy[2:][::-1]
        assert all(u[1] < lo[1] for u, lo in zip(upper, lower, strict=True))  # the upper bound is higher up
    one = _parse(line_chart("g", "goodput", [], bands=[Band("met", [(5.0, 0.8, 0.9)])], y_max=1.0))
    (single,) = [p for p in one.iter(f"{NS}path") if "band" in p.get("class", "")]
    assert "h2" in single.get("d", "")  # one report: still a visible bar


def _time_labels(svg: str) -> list[tuple[float, str, str]]:
    return [
        (float(x), anchor, label)
        for x, anchor, label in re.findall(
            r'<text class="axis time" x="([\d.]+)" y="[\d.]+" text-anchor="(\w+)">([^<]+)<', svg
        )
    ]


@pytest.mark.parametrize("span", [0, 4, 90, 600, 3600, 6 * 3600, 86400, 3 * 86400, 7 * 86400, 40 * 86400])
def test_time_axis_labels_never_overlap_and_fit_the_span(span: float) -> None:
    start = 1_764_000_000.0 + 17  # not a round time
    points = [(start, 0.3)] if span == 0 else [(start + span * i / 9, 0.3) for i in range(10)]
    svg = str(line_chart("c", "t", [Series("mfu", points)]))
    labels = _time_labels(svg)
    assert labels and (len(labels) == 1 if span == 0 else len(labels) >= 2), labels
    boxes = []
    for x, anchor, label in labels:
        w = LABEL_CHAR_WIDTH * len(label)
        left = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        assert left >= 0 and left + w <= 640, (label, left)
        boxes.append((left, left + w))
    boxes.sort()
    assert all(a[1] <= b[0] for a, b in pairwise(boxes)), labels
    texts = [label for _, _, label in labels]
    assert all(a != b for a, b in pairwise(texts)), labels  # no "10:18 UTC10:18 UTC"
    assert svg.count(">UTC<") == 1


def test_time_ticks_name_dates_over_days_and_seconds_over_seconds() -> None:
    assert all(":" not in label for _, label in time_ticks(0, 14 * 86400, 580))
    assert all(label.count(":") == 2 for _, label in time_ticks(100, 110, 580))
    assert [label for _, label in time_ticks(3600 * 10 + 18 * 60, 3600 * 10 + 18 * 60, 580)] == ["10:18"]


def test_the_dashed_baseline_is_drawn_over_the_lines() -> None:
    svg = str(
        line_chart(
            "c", "t", [Series("mfu", [(0, 0.4), (60, 0.4)])], references=[Reference("baseline", 0.4, "ref base")]
        )
    )
    assert svg.index('class="ref base"') > svg.index('class="line s0"')
