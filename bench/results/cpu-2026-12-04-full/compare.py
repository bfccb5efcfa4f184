"""The before/after table (``before-after.md``) from two ``bench/aggregator_scale.py`` figures files.

python3 bench/results/cpu-2026-12-04-full/compare.py BEFORE/results.json AFTER/results.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def median(series: dict[str, list[float]]) -> float:
    values = series["values"]
    return statistics.median(values) if values else float("nan")


ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("ingest, closed loop (median of 3 windows)", lambda s: f"{median(s['ratios']):.2f}"),
    ("per CPU-second of the server, deferred work included", lambda s: f"{median(s['cpu_ratios']):.2f}"),
    ("CPU per push, open loop at the same rate (bare ÷ mfumon)", lambda s: f"{median(s['cpu_ratio_at_open']):.2f}"),
    ("capacity, GPU-samples/s per process (open loop)", lambda s: f"{s['capacity'] * 8:,.0f}"),
    ("p99 at 80% of that capacity, ms", lambda s: f"{median(s['p99_at_cap_80']):.0f}"),
]


def main() -> None:
    before, after = (json.loads(Path(p).read_text()) for p in sys.argv[1:3])
    held = {(s["db"], s["gpus"]): s for s in before["sizes"]}
    for db in ("sqlite", "postgres"):
        sizes = [s for s in after["sizes"] if s["db"] == db]
        print(f"\n{db}, `mfumon serve` ÷ bare app: before → **after**")
        print("| | " + " | ".join(f"{s['gpus']:,} GPUs" for s in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for label, cell in ROWS:
            cells = []
            for s in sizes:
                old = held.get((db, s["gpus"]))
                cells.append(f"{cell(old) if old else '-'} → **{cell(s)}**")
            print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    for name, run in (("before", before), ("after", after)):
        rates = ", ".join(f"{p['gpus']:,} GPUs {p['ingest']:,.0f}/s" for p in run["pushgateway"])
        print(f"{name}: Pushgateway {rates}; {run['minutes']:.0f} min")


if __name__ == "__main__":
    main()
