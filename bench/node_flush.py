"""Cost of one group commit of node samples on PostgreSQL, per node written, with each way of storing the sample.

Run: ``.venv/bin/python bench/node_flush.py [--nodes N] [--rounds R] [--postgres-url URL]`` (or
``MFUMON_TEST_PG_ADMIN_URL``). For each variant, a fresh database at the migrations' head, then R flushes of N
nodes through ``mfumon.api.crud.nodes.upsert_nodes`` (every node pushed a new sample since the last flush, as in a
cluster at steady state); the variants alternate round by round. Per node written: the aggregator's CPU (its thread),
the PostgreSQL backend's CPU (``/proc/<pid>/stat``, 10 ms ticks: use thousands of nodes) and wall time. Variants:

- ``head``: the schema as the migrations leave it (lz4 where the server has it, ``0011_node_sample_lz4``; updates in
  place, ``0017_node_updates_in_place``);
- ``indexed``: head with the index on ``updated_at`` and full pages, as before 0017 (no update can be HOT);
- ``pglz``: the sample column with PostgreSQL's default compression, as before 0011;
- ``external``: no compression at all, stored out of line.

Figures are medians of rounds 2..R (the first fills the table), and ratios to ``pglz``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.aggregator_scale import node_name, node_sample
from mfumon.api.crud.nodes import NodeWrite, upsert_nodes
from mfumon.api.db.migrate import upgrade_to_head
from mfumon.api.db.session import make_engine, make_sessionmaker

VARIANTS = {
    "head": None,
    "indexed": "CREATE INDEX ix_nodes_updated_at ON nodes (updated_at); ALTER TABLE nodes RESET (fillfactor)",
    "pglz": "ALTER TABLE nodes ALTER COLUMN sample SET COMPRESSION pglz",
    "external": "ALTER TABLE nodes ALTER COLUMN sample SET STORAGE EXTERNAL",
}


def _backend_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--postgres-url", default=os.environ.get("MFUMON_TEST_PG_ADMIN_URL"))
    args = parser.parse_args()
    if not args.postgres_url:
        parser.error("--postgres-url or MFUMON_TEST_PG_ADMIN_URL: a PostgreSQL admin URL (loopback: /proc is read)")
    admin = create_engine(args.postgres_url, isolation_level="AUTOCOMMIT")
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    names = {v: f"mfumon_flush_{v}_{uuid.uuid4().hex[:8]}" for v in VARIANTS}
    makers = {}
    try:
        for variant, alter in VARIANTS.items():
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{names[variant]}"'))
            url = make_url(args.postgres_url).set(database=names[variant]).render_as_string(hide_password=False)
            upgrade_to_head(url)
            engine = make_engine(url)
            if alter:
                with engine.begin() as conn:
                    for statement in alter.split("; "):
                        conn.execute(text(statement))
            makers[variant] = (engine, make_sessionmaker(engine))
        figures: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for rnd in range(args.rounds):
            ts = time.time() - 60 + rnd
            bodies = [json.dumps(node_sample(n, ts, rnd)) for n in range(args.nodes)]
            for variant, (_, sessions) in makers.items():
                writes = [NodeWrite(node_name(n), "p", body, ts, ts, 1) for n, body in enumerate(bodies)]
                cpu, wall = time.thread_time(), time.perf_counter()
                with sessions.begin() as session:
                    pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
                    ticks = _backend_ticks(pid)
                    upsert_nodes(session=session, writes=writes, now=ts)
                ticks = _backend_ticks(pid) - ticks
                if rnd == 0:
                    continue
                per_node = 1e6 / args.nodes
                figures[variant]["aggregator"].append((time.thread_time() - cpu) * per_node)
                figures[variant]["postgres"].append(ticks * tick_us / args.nodes)
                figures[variant]["wall"].append((time.perf_counter() - wall) * per_node)
        sizes = {}
        for variant, (engine, _) in makers.items():
            with engine.connect() as conn:
                sizes[variant] = conn.execute(text("SELECT pg_total_relation_size('nodes')")).scalar_one()
        print(f"one flush of {args.nodes:,} nodes, {args.rounds - 1} rounds after the first; us per node written")
        print(f"{'variant':<10}{'aggregator CPU':>16}{'PostgreSQL CPU':>16}{'vs pglz':>9}{'wall':>8}{'table':>9}")
        base = statistics.median(figures["pglz"]["postgres"])
        for variant in VARIANTS:
            f = {k: statistics.median(v) for k, v in figures[variant].items()}
            print(
                f"{variant:<10}{f['aggregator']:>16.1f}{f['postgres']:>16.1f}{f['postgres'] / base:>9.2f}"
                f"{f['wall']:>8.1f}{sizes[variant] / 2**20:>7.0f}MB"
            )
        print("PostgreSQL CPU per round:", {v: [round(x) for x in figures[v]["postgres"]] for v in VARIANTS})
    finally:
        for engine, _ in makers.values():
            engine.dispose()
        with admin.connect() as conn:
            for name in names.values():
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


if __name__ == "__main__":
    main()
