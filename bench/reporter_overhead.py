"""Per-step cost of `JobReporter.step()`, against a no-op function call and a list append in the same process.

Run: ``.venv/bin/python bench/reporter_overhead.py [--calls N]``. The reporter posts to a closed loopback port
(nothing listens), so the background thread keeps failing and retrying while the loop runs: the worst case for
the hot path, since every flush takes the same lock as `step()`. Figures are the best of several repeats.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable

from exporter.job.reporter import JobReporter


def _empty(tokens: int) -> None:
    return None


def _time_ns(call: Callable[..., object], calls: int, repeats: int) -> float:
    """Best mean ns per call over ``repeats`` runs of ``calls`` calls (loop overhead included in all rows)."""
    results = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call(4096)
        results.append((time.perf_counter_ns() - start) / calls)
    return min(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)

    from tests.conftest import reserved_port

    with reserved_port() as port:  # refused, and no other process can be given it meanwhile
        _measure(args, f"http://127.0.0.1:{port}")


def _measure(args: argparse.Namespace, url: str) -> None:
    active = JobReporter("bench", url=url, num_gpus=8, gpu_model=None, interval_seconds=0.01, rank=0)
    inactive = JobReporter("bench", url=url, rank=1)
    sink: list[int] = []

    rows = {
        "empty function call": _time_ns(_empty, args.calls, args.repeats),
        "list.append": _time_ns(sink.append, args.calls, args.repeats),
        "JobReporter.step (rank 0, thread flushing every 10 ms)": _time_ns(active.step, args.calls, args.repeats),
        "JobReporter.step (rank != 0, no-op)": _time_ns(inactive.step, args.calls, args.repeats),
    }
    active.close(timeout_seconds=0.2)
    baseline = rows["empty function call"]
    print(f"{'case':<58} {'ns/call':>9} {'x empty call':>13}")
    for name, ns in rows.items():
        print(f"{name:<58} {ns:>9.0f} {ns / baseline:>13.1f}")
    samples = [_time_ns(active.step, args.calls // 10, 1) for _ in range(5)]  # after close: thread stopped
    print(f"JobReporter.step, thread stopped: median {statistics.median(samples):.0f} ns/call")


if __name__ == "__main__":
    main()
