"""Closed-loop ingest of one size on one database, ``mfumon serve`` against the bare app, windows alternating: the
first table of ``bench/aggregator_scale.py`` alone, in a few minutes, for comparing commits on one machine.

    .venv/bin/python bench/ingest_ab.py --gpus 100000 --db postgres [--repeats 4]
    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/ingest_ab.py ...   # that checkout's server
    .venv/bin/python bench/ingest_ab.py --in-place off ...   # every push through the ASGI stack

The servers are started as ``aggregator_scale.py`` starts them (``python -m mfumon serve``, ``bench/bare_app.py``),
so ``PYTHONPATH`` chooses which code serves: run the same command with and without it, one after the other, for a
before/after on the same machine. Per window: GPU-samples/s and the ratio, each server's CPU per push (its work
after the window included) and, on PostgreSQL, the database server's; then the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aggregator_scale as scale
from loadgen import run_load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=100_000)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument(
        "--in-place",
        choices=["on", "off"],
        default="on",
        help="off: MFUMON_IN_PLACE=0, every push through the ASGI stack (the way out of issue 54)",
    )
    parser.add_argument("--postgres-url", default=os.environ.get("MFUMON_TEST_PG_ADMIN_URL"))
    args = parser.parse_args()
    nodes = args.gpus // scale.GPUS_PER_NODE
    targets = scale.push_targets(nodes)
    ratios, cpu_ratios, bare_us, mfumon_us, postgres_us = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        dbs = scale.Databases(workdir, args.postgres_url)
        try:
            with (
                scale.bare(workdir) as bare,
                scale.mfumon(
                    dbs.new(args.db), workdir, {"MFUMON_IN_PLACE": "1" if args.in_place == "on" else "0"}
                ) as server,
            ):
                scale.fill(server.url, nodes, args.gpus // scale.GPUS_PER_JOB)
                scale.scrape_once(server.url)

                def window(url: str) -> scale.LoadResult:
                    return run_load(url, targets, seconds=args.seconds, processes=2, connections=4)

                for k in range(args.repeats):
                    pair = scale.paired_window(bare, server, window, postgres=args.db == "postgres")
                    b, r, pg = pair.bare, pair.real, pair.postgres_us
                    ratios.append(pair.ratio)
                    cpu_ratios.append(pair.cpu_ratio)
                    bare_us.append(pair.bare_cpu / max(b.ok, 1) * 1e6)
                    mfumon_us.append(pair.real_cpu / max(r.ok, 1) * 1e6)
                    postgres_us.append(pg)
                    print(
                        f"window {k + 1}: bare {b.units_per_second:,.0f}, mfumon {r.units_per_second:,.0f} "
                        f"GPU-samples/s (ratio {ratios[-1]:.2f}; per CPU-second {cpu_ratios[-1]:.2f}); CPU per push "
                        f"bare {bare_us[-1]:.0f} us, mfumon {mfumon_us[-1]:.0f} us, PostgreSQL {pg:.0f} us; "
                        f"mfumon non-2xx {r.sent - r.ok}",
                        flush=True,
                    )
        finally:
            dbs.drop_all()
    median = statistics.median
    print(
        f"median, {args.db}, {args.gpus:,} GPUs: ratio {median(ratios):.2f}, per CPU-second {median(cpu_ratios):.2f}; "
        f"CPU per push bare {median(bare_us):.0f} us, mfumon {median(mfumon_us):.0f} us, "
        f"PostgreSQL {median(postgres_us):.0f} us"
    )


if __name__ == "__main__":
    main()
