"""CPU and memory cost of the node exporter per collection cycle, for 8 GPUs.

Measures ``time.process_time()`` over many full cycles (collect -> batch -> JSON encode -> queue, i.e. everything
the collector thread does) for two sources, and prints it as a share of one core at a 5 s interval (target < 1 %):

- ``sim``: 8 simulated H100s (``mfumon.exporter.node.sources.sim``);
- ``fake-nvml``: the real NVML source code (GPM rotation, NVLink, XID thread, attribution) over the fake pynvml
  from the tests, 8 H100s. The fake is pure Python; real NVML calls are ctypes calls into the driver, whose time is
  mostly spent in the kernel, so this is an estimate of the exporter's own Python work.

With ``--push`` it also starts ``mfumon serve`` on loopback and measures the sender thread's client-side cost of one
POST per cycle (the server's CPU is another process and is not counted). Resident memory is read from
/proc/self/statm before and after; figures are reported against the baseline measured in the same process.

    python bench/exporter_overhead.py [--cycles 2000] [--interval 5] [--push]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mfumon.exporter.node.pipeline import Agent  # noqa: E402
from mfumon.exporter.node.push import Sender  # noqa: E402
from mfumon.exporter.node.sources.sim import SimSource, SimWorkload  # noqa: E402
from mfumon.exporter.node.spool import MemorySpool  # noqa: E402
from mfumon.exporter.samples import NodeBatch  # noqa: E402

GPUS = 8


def rss_bytes() -> int:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_per_cycle(cycle: Callable[[], object], cycles: int) -> float:
    """Mean CPU seconds (user + system, this process, all threads) of one call of ``cycle``."""
    for _ in range(min(50, cycles)):  # warm-up: caches, first GPM interval, lazy imports
        cycle()
    gc.collect()
    started = time.process_time()
    for _ in range(cycles):
        cycle()
    return (time.process_time() - started) / cycles


class _Drain:
    """A sender stand-in that keeps what the collector hands over from piling up (the queue is bounded)."""

    def __init__(self) -> None:
        self.spool = MemorySpool(1024)
        self.last_success = None
        self.encoded = 0

    def submit(self, batch: NodeBatch) -> None:
        self.encoded += len(batch.encode())

    def start(self) -> None:
        pass

    def stop(self, timeout_seconds: float = 0.0) -> None:
        pass


def make_sim_agent() -> Agent:
    source = SimSource(node="bench", count=GPUS, workload=SimWorkload("training", 0.45, job_id="bench"))
    return Agent(source=source, sender=_Drain(), node="bench", interval_seconds=5.0)  # type: ignore[arg-type]


def make_fake_nvml_agent() -> tuple[Agent, Callable[[], None]]:
    from tests.exporter.node import fake_pynvml as fake

    sys.modules["pynvml"] = fake
    gpus = [
        fake.FakeGpu(
            uuid=f"GPU-bench-{i}",
            utilization_gpu_pct=97,
            memory_used_bytes=70 * 1024**3,
            power_mw=650_000,
            processes=[(os.getpid(), 60 * 1024**3)],
            gpm_values={2: 85.0, 3: 40.0, 5: 52.0, 10: 35.0, 20: 100.0, 21: 100.0, 60: 40000.0, 61: 40000.0},
        )
        for i in range(GPUS)
    ]
    fake.reset(gpus)
    from mfumon.exporter.node.attribution import JobResolver
    from mfumon.exporter.node.sources.nvml import NvmlSource
    from mfumon.exporter.node.sources.nvml_api import NvmlApi

    # The benchmark runs cycles back to back, far closer than GPM's 100 ms minimum; a clock that advances 1 s per
    # reading makes every cycle compute GPM metrics, as a real 5 s interval does; with ~9 readings per cycle,
    # rescan_s=110 re-enumerates every ~12 cycles, as the default 60 s does at a 5 s interval.
    ticks = iter(range(10**9))
    source = NvmlSource(NvmlApi.load(), JobResolver("/proc"), clock=lambda: float(next(ticks)), rescan_seconds=110)
    agent = Agent(source=source, sender=_Drain(), node="bench", interval_seconds=5.0)  # type: ignore[arg-type]
    return agent, source.close


def push_cost(cycles: int) -> float:
    """Client-side CPU of one POST of an 8-GPU batch to a local ``mfumon serve`` (seconds)."""

    from tests.conftest import launch_server, wait_healthy

    workdir = Path(tempfile.mkdtemp(prefix="mfumon-bench-"))
    live = launch_server(workdir, database_url=f"sqlite:///{workdir / 'bench.db'}")  # port 0, read back
    server = live.process
    try:
        url = live.url
        wait_healthy(live)
        sender = Sender(url, MemorySpool(1024**2))
        source = SimSource(node="bench-push", count=GPUS)
        batches = [NodeBatch("bench-push", time.time() + i * 1e-3, tuple(source.collect())) for i in range(cycles + 50)]
        it = iter(batches)
        cost = cpu_per_cycle(lambda: sender._push(next(it).encode()), cycles)
        sender.stop()
        return cost
    finally:
        server.terminate()
        server.wait(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=5.0, help="collection interval for the %% of a core")
    parser.add_argument("--push", action="store_true", help="also measure the POST to a local mfumon serve")
    args = parser.parse_args()

    baseline_rss = rss_bytes()
    print(f"baseline: RSS {baseline_rss / 2**20:.1f} MiB after imports (python {sys.version.split()[0]})")
    print(f"{GPUS} GPUs, {args.cycles} cycles each, share of one core at a {args.interval:g} s interval:\n")
    results: dict[str, float] = {}

    sim = make_sim_agent()
    results["sim"] = cpu_per_cycle(sim.collect_once, args.cycles)
    rss_sim = rss_bytes()

    fake_agent, close = make_fake_nvml_agent()
    try:
        results["fake-nvml"] = cpu_per_cycle(fake_agent.collect_once, args.cycles)
    finally:
        close()
    rss_fake = rss_bytes()

    if args.push:
        results["push (client side)"] = push_cost(min(args.cycles, 500))

    for name, seconds in results.items():
        share = 100.0 * seconds / args.interval
        verdict = "ok" if share < 1.0 else "OVER TARGET"
        print(f"  {name:<20} {seconds * 1e3:8.3f} ms CPU per cycle  = {share:.4f} % of a core  [{verdict}]")
    if "push (client side)" in results:
        total = results["fake-nvml"] + results["push (client side)"]
        print(f"  {'fake-nvml + push':<20} {total * 1e3:8.3f} ms CPU per cycle  = {100 * total / args.interval:.4f} %")
    print(f"\n  ratio fake-nvml / sim: {results['fake-nvml'] / results['sim']:.2f}x")
    print(f"  RSS after sim: {rss_sim / 2**20:.1f} MiB (+{(rss_sim - baseline_rss) / 2**20:.1f} MiB over baseline)")
    print(f"  RSS after fake-nvml: {rss_fake / 2**20:.1f} MiB (+{(rss_fake - baseline_rss) / 2**20:.1f} MiB)")
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"  peak RSS: {peak_kib / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
