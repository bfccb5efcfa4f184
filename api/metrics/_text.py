"""Prometheus text exposition (format 0.0.4) for one sample line; everything else joins cached lines."""

from __future__ import annotations

import math
from collections.abc import Iterable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def labels_text(labels: Iterable[tuple[str, str]]) -> str:
    """``{a="x",b="y"}`` (empty string when there are no labels)."""
    inner = ",".join(f'{name}="{escape_label_value(value)}"' for name, value in labels)
    return "{" + inner + "}" if inner else ""


def sample_line(name: str, labels: str, value: float) -> str:
    return f"{name}{labels} {format_value(value)}\n"
