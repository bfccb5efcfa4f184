"""docs/reference/mfu.md shows the built-in peak table as it is: the section is rendered from `DEFAULT_DEVICES`.

After editing `mfumon/mfu/_peaks.py`, regenerate the section with
`WRITE_PEAK_TABLE_DOCS=1 .venv/bin/pytest -q -p no:cacheprovider tests/mfu/test_docs_peak_table.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mfumon.mfu import DEFAULT_DEVICES, DeviceSpec

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "mfu.md"
BEGIN = "<!-- peak-table:begin (generated from mfumon/mfu/_peaks.py by tests/mfu/test_docs_peak_table.py) -->"
END = "<!-- peak-table:end -->"
COLUMNS = ("fp4", "fp8", "int8", "bf16", "fp16", "tf32", "fp32")


def _cell(spec: DeviceSpec, dtype: str) -> str:
    peak = spec.peaks[dtype]
    if peak is None:
        return "lacks" if dtype in spec.lacks else "-"
    text = f"{peak / 1e12:g}"
    return f"{text}*" if dtype in spec.unconfirmed else text


def _bandwidth(spec: DeviceSpec) -> str:
    if spec.memory_bandwidth_bytes_per_second is None:
        return "-"
    text = f"{spec.memory_bandwidth_bytes_per_second / 1e12:g}"
    return f"{text}*" if "memory_bandwidth" in spec.unconfirmed else text


def _nvlink(spec: DeviceSpec) -> str:
    if spec.nvlink_bandwidth_bytes_per_second is None:
        return "-"
    text = f"{spec.nvlink_bandwidth_bytes_per_second / 1e9:g}"
    return f"{text}*" if "nvlink_bandwidth" in spec.unconfirmed else text


def render() -> str:
    header = "| key | matches e.g. | " + " | ".join(COLUMNS) + " | mem TB/s | NVLink GB/s |"
    rule = "|---|---|" + "---:|" * (len(COLUMNS) + 2)
    rows = [
        f"| `{spec.key}` | {', '.join(f'`{name}`' for name in spec.names[:2])} | "
        + " | ".join(_cell(spec, dtype) for dtype in COLUMNS)
        + f" | {_bandwidth(spec)} | {_nvlink(spec)} |"
        for spec in DEFAULT_DEVICES
    ]
    reasons = [f"- `{spec.key}` {dtype}: {reason}." for spec in DEFAULT_DEVICES for dtype, reason in spec.lacks.items()]
    return "\n".join([BEGIN, header, rule, *rows, "", "Why a part lacks a dtype:", "", *reasons, END])


def test_docs_show_the_peak_table_as_it_is() -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    if os.environ.get("WRITE_PEAK_TABLE_DOCS") == "1":
        DOC.write_text(text[:start] + render() + text[end:], encoding="utf-8")
        text = DOC.read_text(encoding="utf-8")
        start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == render(), "docs/reference/mfu.md's peak table drifted: regenerate it (module docstring)"
