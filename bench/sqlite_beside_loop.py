"""SQLite work on a background thread while the event loop is busy: the sample writer's flush and a large read.

Run: ``.venv/bin/python bench/sqlite_beside_loop.py [--nodes N]``. Python's ``sqlite3`` lets go of the GIL for every
statement it prepares and every row it steps; while another thread keeps the CPU (the event loop under load), taking
the GIL back waits until that thread is asked to drop it, after the interpreter's switch interval. Work of many
small steps then takes steps x interval, whatever its CPU. Measured side by side, each alone and beside a thread
that never sleeps (the event loop at saturation; the real loop lets go of the GIL at each syscall, so it is a bound):

- flush: N nodes' samples upserted in one transaction, 500 rows a statement (``mfumon.api.crud.nodes``) and, as the
  peer, one statement per row (an ``executemany``, as before);
- read: N rows of the node table (``SELECT`` of every row, each one a step);

each at Python's default switch interval (5 ms) and at the one ``mfumon serve`` sets (``mfumon.api.server``).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from bench.aggregator_scale import node_name, node_sample
from mfumon.api.crud.nodes import NodeWrite, _upsert, node_rows, upsert_nodes
from mfumon.api.db.migrate import upgrade_to_head
from mfumon.api.db.session import make_engine, make_sessionmaker
from mfumon.api.server import SWITCH_INTERVAL_S


def _writes(nodes: int, ts: float) -> list[NodeWrite]:
    return [NodeWrite(node_name(n), "p", json.dumps(node_sample(n, ts)), ts, ts, 1) for n in range(nodes)]


def flush_by_statements(sessions: sessionmaker[Session], writes: list[NodeWrite]) -> None:
    with sessions.begin() as session:
        upsert_nodes(session=session, writes=writes, now=writes[0].last_seen_at)


def flush_row_by_row(sessions: sessionmaker[Session], writes: list[NodeWrite]) -> None:
    rows = node_rows(writes, writes[0].last_seen_at)
    with sessions.begin() as session:
        session.execute(_upsert("sqlite"), rows)


def read_all(sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        session.execute(text("SELECT name, sample FROM nodes")).all()


def _alone(work: Callable[[], None]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _beside_busy_thread(work: Callable[[], None]) -> float:
    """Wall time of ``work`` on a thread beside one that never sleeps."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        time.sleep(0.1)
        return _alone(lambda: _joined(threading.Thread(target=work)))
    finally:
        stop.set()
        spinner.join()


def _joined(thread: threading.Thread) -> None:
    thread.start()
    thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=12_500, help="nodes a flush (12,500: 100,000 GPUs)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mfumon-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'nodes.db'}"
        upgrade_to_head(url)
        engine = make_engine(url)
        sessions = make_sessionmaker(engine)
        flush_by_statements(sessions, _writes(args.nodes, 1.0))  # the table full, as at steady state
        stamp = [1.0]

        def fresh() -> list[NodeWrite]:
            stamp[0] += 1.0
            return _writes(args.nodes, stamp[0])

        cases: list[tuple[str, Callable[[], Callable[[], None]]]] = [
            ("flush, 500 rows a statement", lambda: functools.partial(flush_by_statements, sessions, fresh())),
            ("flush, a statement per row", lambda: functools.partial(flush_row_by_row, sessions, fresh())),
            ("read every row", lambda: functools.partial(read_all, sessions)),
        ]
        print(f"SQLite, {args.nodes:,} nodes; seconds of wall time")
        print(f"{'work':30} {'switch interval':>16} {'alone':>8} {'beside a busy thread':>22} {'ratio':>8}")
        default = sys.getswitchinterval()
        try:
            for interval in (default, SWITCH_INTERVAL_S):
                sys.setswitchinterval(interval)
                for name, make in cases:
                    alone = _alone(make())
                    beside = _beside_busy_thread(make())
                    print(
                        f"{name:30} {interval * 1e3:>13.1f} ms {alone:>8.2f} {beside:>22.2f} {beside / alone:>7.1f}x",
                        flush=True,
                    )
        finally:
            sys.setswitchinterval(default)
            engine.dispose()


if __name__ == "__main__":
    main()
