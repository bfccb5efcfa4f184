"""Step timing on a GPU: input wait and exposed gradient sync from CUDA events, checked against known delays.

Run on a machine with one or more NVIDIA GPUs: ``.venv/bin/python bench/gpu_job_timing.py [--out results.json]``.
Needs torch with CUDA. Each check prints what was expected and what the hooks measured, and the script exits 1 if
one is off:

1. **input wait, GPU idle**: the loader sleeps 50 ms after the GPU finished the previous step: ~50 ms.
2. **input wait, hidden**: the loader sleeps 50 ms while the GPU still runs the ~200 ms of matmuls that ended the
   previous step (the host returned early): the device never waited, so ~0 (host-side timing would say 50 ms).
3. **exposed sync**: DDP over two processes (NCCL on two GPUs, or gloo with CUDA tensors on one GPU); rank 1's
   gradient is 100 ms late; rank 0's exposed sync ~100 ms more than without the delay (what remains without it is
   the reduction itself: one bucket, ready only when backward ends, all exposed; about 35 ms for 64 MB over gloo
   on one H200).
4. **overhead**: median step time of a small launch-bound model bare, with input-wait timing, and with sync timing
   too (CUDA events), interleaved; then a cProfile of the hooked loop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from mfumon.exporter.job.reporter import JobReporter
from mfumon.exporter.job.reporter._phases import StepPhases

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import reserved_port

#: Reporters post to a loopback port nobody listens on (reports stay queued, ``last_report`` is kept); set by main.
CLOSED_URL = "http://127.0.0.1:9"


def _report(reporter: JobReporter) -> dict[str, Any]:
    reporter.flush(timeout_seconds=0.05)
    report = dict(reporter.last_report or {})
    reporter.close(timeout_seconds=0.1)
    return report


def input_wait(hidden: bool, steps: int = 12) -> dict[str, Any]:
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.Linear(4096, 4096)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(64, 4096, device="cuda")
    busy = torch.randn(8192, 8192, device="cuda")
    reporter = JobReporter("gpu-wait", url=CLOSED_URL, model=model, gpu_model=None, rank=0, start=False)
    for _ in range(steps):
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if hidden:  # the step ends with ~0.2 s of device work the host does not wait for
            for _ in range(20):
                busy = busy @ busy
                busy = busy / busy.norm()
        reporter.step(64)  # the step ends here on the host
        if not hidden:
            torch.cuda.synchronize()  # the device is idle from here
        time.sleep(0.05)  # the loader: the device waits for it only when it has nothing queued
    torch.cuda.synchronize()
    return _report(reporter)


def _ddp_worker(rank: int, store: str, url: str, backend: str, delay: float, out: str) -> None:
    device = rank % torch.cuda.device_count()
    torch.cuda.set_device(device)
    torch.distributed.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=2)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4096, 4096).cuda(), device_ids=[device])
    if rank == 1 and delay:

        def late(grad: torch.Tensor) -> torch.Tensor:
            time.sleep(delay)  # a slow rank: its gradient is ready `delay` seconds after rank 0's
            return grad

        model.module.weight.register_hook(late)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    reporter = JobReporter("gpu-ddp", url=url, model=model, gpu_model=None, rank=rank, start=False)
    for _ in range(10):
        loss = model(torch.randn(64, 4096, device="cuda")).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        reporter.step(64)
    torch.cuda.synchronize()
    report = _report(reporter)
    if rank == 0:
        Path(out).write_text(json.dumps(report))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


def ddp_sync(delay: float) -> dict[str, Any]:
    backend = "nccl" if torch.cuda.device_count() >= 2 else "gloo"
    with tempfile.TemporaryDirectory() as folder:
        out, store = f"{folder}/report.json", f"{folder}/store"
        torch.multiprocessing.spawn(_ddp_worker, args=(store, CLOSED_URL, backend, delay, out), nprocs=2)
        report = json.loads(Path(out).read_text())
    report["backend"] = backend
    return report


def overhead(steps: int = 200, rounds: int = 5) -> dict[str, float]:
    """Median time per step of a small launch-bound model, bare and with each part of the hooks, in µs."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 1024)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(32, 1024, device="cuda")

    def run(phases: StepPhases | None) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            if phases is not None:
                phases.compute_started()
            loss = model(x).square().mean()
            if phases is not None:
                phases.backward_starting(loss)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if phases is not None:
                phases.step_ended()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / steps

    variants = {
        "plain": lambda: None,
        "input_wait": lambda: StepPhases(cuda=True, measure_sync=False),
        "input_wait_and_sync": lambda: StepPhases(cuda=True, measure_sync=True),
    }
    run(None)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):  # interleaved, so drift hits every variant alike
        for name, make in variants.items():
            times[name].append(run(make()))
    medians = {name: statistics.median(values) * 1e6 for name, values in times.items()}
    out = {f"{name}_us_per_step": us for name, us in medians.items()}
    for name in ("input_wait", "input_wait_and_sync"):
        out[f"{name}_added_us_per_step"] = medians[name] - medians["plain"]
    out["ratio"] = medians["input_wait_and_sync"] / medians["plain"]
    return out


def profile_hooks(steps: int = 300) -> str:
    """Where the hooks' time goes (cProfile of the hooked loop, top entries by own time)."""
    import cProfile
    import io
    import pstats

    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 1024)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(32, 1024, device="cuda")
    phases = StepPhases(cuda=True, measure_sync=True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        phases.compute_started()
        loss = model(x).square().mean()
        phases.backward_starting(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        phases.step_ended()
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(18)
    return text.getvalue()


def main() -> int:
    global CLOSED_URL
    with reserved_port() as port:  # refused, and no other process can be given it meanwhile
        CLOSED_URL = f"http://127.0.0.1:{port}"
        return _checks()


def _checks() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="gpu_job_timing.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    checks: list[tuple[str, bool]] = []
    idle = input_wait(hidden=False)
    results["input_wait_idle"] = idle
    checks.append(("input wait, device idle ~0.05 s", 0.04 <= idle.get("data_wait_seconds", -1) <= 0.1))
    hidden = input_wait(hidden=True)
    results["input_wait_hidden"] = hidden
    checks.append(("input wait hidden behind device work ~0", hidden.get("data_wait_seconds", 1) < 0.01))
    slow = ddp_sync(delay=0.1)
    balanced = ddp_sync(delay=0.0)
    results["ddp_slow_rank"], results["ddp_balanced"] = slow, balanced
    checks.append(("exposed sync with a rank 0.1 s late ~0.1 s", 0.08 <= slow.get("comm_seconds", -1) <= 0.2))
    # Without a delay what remains is the reduction itself, all exposed here (one bucket, ready only when backward
    # ends; gloo also copies through the host): the delay must show up one to one on top of it.
    added = slow.get("comm_seconds", -1) - balanced.get("comm_seconds", 1)
    checks.append(("a rank 0.1 s late adds ~0.1 s of exposed sync", 0.08 <= added <= 0.13))
    results["overhead"] = overhead()
    results["profile"] = profile_hooks()
    print(results["profile"])
    results["checks"] = {name: ok for name, ok in checks}
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
