"""Cost of the sample writer's flush on SQLite, per node written: its own engine against SQLite's defaults.

Run: ``.venv/bin/python bench/sqlite_flush.py [--nodes N] [--changed C] [--rounds R]``. For each variant, a fresh
database at the migrations' head holding N nodes' samples (8 GPUs each, as ``bench/aggregator_scale.py`` pushes),
then R flushes of C nodes picked at random through ``mfumon.api.crud.nodes.upsert_nodes``: a large cluster whose
nodes push less often than the writer flushes, so every push is a row. The variants take turns, round by round,
each on its own file. Per node written: this thread's CPU (SQLite works in it) and wall time, mean and spread over
the rounds after the first (a checkpoint lands in some rounds and not others, so the mean is what a flush costs).

- ``defaults``: SQLite's page cache (2 MB) and checkpoint (every 1,000 pages), as the writer had before;
- ``cache``: the writer's page cache, SQLite's checkpoint;
- ``writer``: the writer's engine as ``mfumon serve`` opens it (``mfumon.api.db.session.make_writer_engine``).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.aggregator_scale import node_name, node_sample
from mfumon.api.crud.nodes import NodeWrite, upsert_nodes
from mfumon.api.db.migrate import upgrade_to_head
from mfumon.api.db.session import SQLITE_WRITER_CACHE_KIB, make_engine, make_sessionmaker, make_writer_engine


def _engine(variant: str, url: str) -> Engine:
    if variant == "writer":
        engine = make_writer_engine(url, make_engine(url))
        assert engine is not None
        return engine
    engine = make_engine(url, cache_kib=SQLITE_WRITER_CACHE_KIB if variant == "cache" else None, connections=1)
    if variant in ("defaults", "cache"):

        @event.listens_for(engine, "connect")
        def _defaults(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("PRAGMA wal_autocheckpoint=1000")

    return engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=12_500)
    parser.add_argument("--changed", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    variants = ("defaults", "cache", "writer")
    bodies = [json.dumps(node_sample(n, 1.0)) for n in range(args.nodes)]
    work = Path(tempfile.mkdtemp(prefix="sqlite-flush-"))
    engines: dict[str, Engine] = {}
    try:
        for variant in variants:
            url = f"sqlite:///{work / variant}.db"
            upgrade_to_head(url)
            engines[variant] = _engine(variant, url)
        cpu: dict[str, list[float]] = defaultdict(list)
        wall: dict[str, list[float]] = defaultdict(list)
        for rnd in range(args.rounds + 1):
            picked = range(args.nodes) if rnd == 0 else random.sample(range(args.nodes), args.changed)
            ts = 1.0 + rnd
            writes = [NodeWrite(node_name(n), "p", bodies[n], ts, ts, 1) for n in picked]
            for variant in variants:
                sessions = make_sessionmaker(engines[variant])
                started_cpu, started = time.thread_time(), time.perf_counter()
                with sessions.begin() as session:
                    upsert_nodes(session=session, writes=writes, now=ts)
                if rnd:
                    cpu[variant].append((time.thread_time() - started_cpu) / len(writes) * 1e6)
                    wall[variant].append((time.perf_counter() - started) / len(writes) * 1e6)
        print(f"flushes of {args.changed:,} of {args.nodes:,} nodes, {args.rounds} rounds; us per node written")
        print(f"{'variant':<10}{'CPU mean':>10}{'min-max':>14}{'vs defaults':>13}{'wall mean':>11}")
        base = statistics.mean(cpu["defaults"])
        for variant in variants:
            mean = statistics.mean(cpu[variant])
            spread = f"{min(cpu[variant]):.0f}-{max(cpu[variant]):.0f}"
            print(f"{variant:<10}{mean:>10.1f}{spread:>14}{mean / base:>13.2f}{statistics.mean(wall[variant]):>11.1f}")
    finally:
        for engine in engines.values():
            engine.dispose()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
