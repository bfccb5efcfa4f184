"""Interval arithmetic over device activities: union, measure, and the measure of an intersection."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of intervals as sorted, disjoint intervals."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def measure(merged: Iterable[Interval]) -> float:
    """Total length of disjoint intervals."""
    return sum(end - start for start, end in merged)


def overlap(a: list[Interval], b: list[Interval]) -> float:
    """Length of the intersection of two merged (sorted, disjoint) interval lists."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            total += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def clip(merged: list[Interval], start: float, end: float) -> list[Interval]:
    """The part of merged intervals inside [start, end]."""
    return [(max(s, start), min(e, end)) for s, e in merged if e > start and s < end]
