"""Prometheus text exposition (format 0.0.4): a family's header, one sample line, a small family whole.

Shared by every resource module of :mod:`mfumon.api.metrics`, which declare their :class:`Family` objects beside the
code that renders them; the store joins their cached lines.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(value: str) -> str:
    if "\\" not in value and '"' not in value and "\n" not in value:
        return value  # the common case, and the cheap one: node names and uuids never need escaping
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_SPELLED = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}


def format_value(value: float) -> str:
    """Whole numbers exactly (``600``, byte counters); other values with 12 significant digits, more than any
    counter or ratio carries, at less than half the cost of Python's shortest round-trip ``repr`` (this runs for
    every job, node and summary line; a node's GPU lines are filled in by ``%`` instead, see
    :mod:`mfumon.api.metrics.node`); Prometheus's spellings of NaN and the infinities."""
    if value.__class__ is float:
        if value.is_integer():
            return str(int(value)) if -1e17 < value < 1e17 else repr(value)
        text = "%.12g" % value  # noqa: UP031  # a fifth cheaper than format(value, ".12g")
        return _SPELLED.get(text, text) if text[-1] in "nf" else text
    if value.__class__ is int:
        return str(value)
    return format_value(float(value))  # bool, numpy scalars, Decimal ...


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    type: str  # gauge | counter | histogram
    help: str

    def header(self) -> str:
        return f"# HELP {self.name} {self.help}\n# TYPE {self.name} {self.type}\n"


def gauge(name: str, help_text: str) -> Family:
    return Family(f"mfumon_{name}", "gauge", help_text)


def counter(name: str, help_text: str) -> Family:
    return Family(f"mfumon_{name}", "counter", help_text)


def histogram(name: str, help_text: str) -> Family:
    return Family(f"mfumon_{name}", "histogram", help_text)


def declare(*families: Family) -> dict[str, Family]:
    """Families by name, in exposition order."""
    return {family.name: family for family in families}


Rows = Iterable[tuple[list[tuple[str, str]], float | None]]  # (labels, value) per series; None: no series


def family_text(family: Family, rows: Rows) -> str:
    """A family rendered whole, header included even without series: the few series rendered on every scrape."""
    name = family.name
    return family.header() + "".join(sample_line(name, labels_text(labels), v) for labels, v in rows if v is not None)


def labels_text(labels: Iterable[tuple[str, str]]) -> str:
    """``{a="x",b="y"}`` (empty string when there are no labels)."""
    inner = ",".join([f'{name}="{escape_label_value(value)}"' for name, value in labels])
    return "{" + inner + "}" if inner else ""


def sample_line(name: str, labels: str, value: float) -> str:
    return f"{name}{labels} {format_value(value)}\n"


@functools.lru_cache(maxsize=1 << 18)  # every GPU of 100,000 twice over, about 150 bytes each
def gpu_labels(node: str, index: int, uuid: str) -> str:
    """``node="…",gpu="…",uuid="…"``, the identity on every per-GPU line, built once per GPU rather than per push."""
    return f'node="{escape_label_value(node)}",gpu="{index}",uuid="{escape_label_value(uuid)}"'
