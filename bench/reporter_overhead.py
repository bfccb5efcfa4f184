"""Per-step cost of job reporting: `JobReporter.step()` alone, and the step-timing hooks on a real training step.

Run: ``.venv/bin/python bench/reporter_overhead.py [--calls N] [--steps N]``. Two parts, each a ratio measured in one
run:

1. ``step()`` against a no-op function call and a list append. The reporter posts to a closed loopback port
   (nothing listens), so the background thread keeps failing and retrying while the loop runs: the worst case for
   the hot path, since every flush takes the same lock as `step()`.
2. The step-timing hooks (`mfumon.exporter.job.reporter._phases`), part by part: each part is the same torch work timed
   with and without the hook (a forward with the pre-hook, a backward with the tensor hook and the two final
   callbacks, the per-step bookkeeping), best of many runs as ``timeit`` reports it (the run least disturbed by the
   rest of the machine). Their sum is the added host time per step, shown also as a share of 10 ms to 1 s steps.
   On a GPU the marks are CUDA events instead of clock reads (``bench/gpu_job_timing.py`` measures that path).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mfumon.exporter.job.reporter import JobReporter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import reserved_port


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


def step_call(url: str, calls: int, repeats: int) -> None:
    active = JobReporter("bench", url=url, num_gpus=8, gpu_model=None, interval_seconds=0.01, rank=0)
    inactive = JobReporter("bench", url=url, rank=1)
    sink: list[int] = []

    rows = {
        "empty function call": _time_ns(_empty, calls, repeats),
        "list.append": _time_ns(sink.append, calls, repeats),
        "JobReporter.step (rank 0, thread flushing every 10 ms)": _time_ns(active.step, calls, repeats),
        "JobReporter.step (rank != 0, no-op)": _time_ns(inactive.step, calls, repeats),
    }
    active.close(timeout_seconds=0.2)
    baseline = rows["empty function call"]
    print(f"{'case':<58} {'ns/call':>9} {'x empty call':>13}")
    for name, ns in rows.items():
        print(f"{name:<58} {ns:>9.0f} {ns / baseline:>13.1f}")
    samples = [_time_ns(active.step, calls // 10, 1) for _ in range(5)]  # after close: thread stopped
    print(f"JobReporter.step, thread stopped: median {statistics.median(samples):.0f} ns/call")


def _best_us(call: Callable[[], object], number: int, repeats: int) -> float:
    """Best mean microseconds of the thread's CPU time per call over ``repeats`` runs (``timeit``'s rule: the run
    least disturbed by the rest of a shared machine; CPU time leaves out the time other processes held the core)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(number):
            call()
        best = min(best, (time.thread_time() - start) / number)
    return best * 1e6


def step_timing(number: int, repeats: int) -> None:
    """The step-timing hooks' cost per step, part by part, each against the same work without the hook."""
    import torch

    from mfumon.exporter.job.reporter._phases import StepPhases

    torch.set_num_threads(1)
    module, x = torch.nn.Linear(4, 4), torch.randn(1, 4)
    leaf = torch.ones(4, requires_grad=True)

    def backward(phases: StepPhases | None) -> None:
        y = (leaf * 2).sum()
        if phases is not None:
            phases.backward_starting(y)
        y.backward()

    phases = StepPhases(measure_sync=True)
    forward_plain = _best_us(lambda: module(x), number, repeats)
    handles = [module.register_forward_pre_hook(lambda m, a: None, prepend=True)]
    forward_empty_hook = _best_us(lambda: module(x), number, repeats)
    handles[0].remove()
    waiting = StepPhases().watch(module)
    forward_wait_hook = _best_us(lambda: module(x), number, repeats)
    waiting.close()
    syncing = StepPhases(measure_sync=True).watch(module)
    forward_sync_hooks = _best_us(lambda: module(x), number, repeats)
    syncing.close()

    def one_step() -> None:
        phases.compute_started()
        phases.step_ended()

    bookkeeping = _best_us(one_step, number, repeats)
    backward_plain = _best_us(lambda: backward(None), number, repeats)
    backward_sync = _best_us(lambda: backward(phases), number, repeats)

    wait_cost = (forward_wait_hook - forward_plain) + bookkeeping
    sync_cost = (forward_sync_hooks - forward_plain) + bookkeeping + (backward_sync - backward_plain)
    rows = {
        "forward pre-hook (compute start)": forward_wait_hook - forward_plain,
        "  of which torch's hook dispatch (an empty hook)": forward_empty_hook - forward_plain,
        "forward pre- and post-hook (+ backward start)": forward_sync_hooks - forward_plain,
        "compute_started() + step_ended()": bookkeeping,
        "backward: tensor hook + two final callbacks": backward_sync - backward_plain,
        "per step, input wait timed": wait_cost,
        "per step, input wait and gradient sync timed": sync_cost,
    }
    print(f"\nstep-timing hooks on the CPU, host clock (thread CPU time, best of {repeats} x {number})")
    print(f"{'part':<52} {'us/step':>9} {'x step()':>9}")
    idle = JobReporter("b", url="http://127.0.0.1:9", gpu_model=None, start=False)  # never sends: no thread
    step_us = _time_ns(idle.step, number, 3) / 1e3
    for name, us in rows.items():
        print(f"{name:<52} {us:>9.2f} {us / step_us:>9.1f}")
    for step_ms in (10, 100, 1000):
        print(f"share of a {step_ms} ms training step, sync timed: {sync_cost / (step_ms * 1e3):.4%}")


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=2000, help="calls per timed run of each hook part")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    with reserved_port() as port:  # refused, and no other process can be given it meanwhile
        step_call(f"http://127.0.0.1:{port}", args.calls, args.repeats)
    step_timing(args.number, args.repeats * 3)


if __name__ == "__main__":
    main()
