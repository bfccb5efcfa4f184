"""One-GPU check of the profile summary against a trace whose compute/copy overlap is known (issue 32 #5).

Run on a CUDA machine: ``python bench/profile_gpu_check.py --out DIR``. Each step launches, at the same instant, a
compute stream (``torch.cuda._sleep``, a kernel of fixed length, then a bf16 GEMM on tensor cores) and a copy stream
(a pinned host-to-device copy), then waits and sleeps on the host, leaving the device idle for a known gap. CUDA
events time each stream's work per step; the profiler (the agent's own `Capture`) records the same steps. The check:
the summary's compute time against the compute stream's event time, its busy time (span - idle) against the union
the events give (the longer of the two streams, since they start together), its idle time against the host gaps,
and a tensor-core share between 0 and 1 that counts the GEMM. Not run in this task's session (no GPU was lent).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from mfumon.exporter.job.profile import ProfileRequest
from mfumon.exporter.job.profile._capture import Capture

STEPS = 5
HOST_GAP_SECONDS = 0.003


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sleep-cycles", type=int, default=4_000_000, help="torch.cuda._sleep length (cycles)")
    parser.add_argument("--copy-mib", type=int, default=256)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA device"
    compute, copy = torch.cuda.Stream(), torch.cuda.Stream()
    host = torch.empty(args.copy_mib << 20, dtype=torch.uint8).pin_memory()
    device = torch.empty_like(host, device="cuda")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    events: list[tuple[float, float]] = []

    def step() -> None:
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        marks[0].record(compute)
        with torch.cuda.stream(compute):
            torch.cuda._sleep(args.sleep_cycles)
            a @ a
        marks[1].record(compute)
        marks[2].record(copy)
        with torch.cuda.stream(copy):
            device.copy_(host, non_blocking=True)
        marks[3].record(copy)
        torch.cuda.synchronize()
        events.append((marks[0].elapsed_time(marks[1]) / 1e3, marks[2].elapsed_time(marks[3]) / 1e3))
        time.sleep(HOST_GAP_SECONDS)

    for _ in range(5):
        step()
    events.clear()
    capture = Capture(ProfileRequest(id=1, steps=STEPS, ranks="all"), steps=STEPS)
    done = False
    while not done:
        step()
        done = capture.step()
    with tempfile.TemporaryDirectory() as scratch:
        summary = capture.finish(Path(scratch), "gpu-check", max_trace_bytes=1 << 40).summary
    profiled = events[1:]  # the first step is the profiler's warm-up, not recorded
    expected_compute = sum(c for c, _ in profiled)
    expected_busy = sum(max(c, m) for c, m in profiled)
    busy = summary.span_seconds - summary.idle_seconds
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "steps": len(profiled),
        "summary": summary.to_json(),
        "events_compute_seconds": expected_compute,
        "events_copy_seconds": sum(m for _, m in profiled),
        "events_busy_seconds": expected_busy,
        "compute_over_events": summary.compute_seconds / expected_compute,
        "busy_over_events": busy / expected_busy,
        "idle_seconds_per_gap": summary.idle_seconds / max(1, len(profiled) - 1),
        "host_gap_seconds": HOST_GAP_SECONDS,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "profile_gpu_check.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "summary"}, indent=2))
    assert 0.9 < result["compute_over_events"] < 1.1, result["compute_over_events"]
    assert 0.9 < result["busy_over_events"] < 1.1, result["busy_over_events"]
    assert 0.0 < (summary.tensor_core_ratio or 0.0) < 1.0


if __name__ == "__main__":
    main()
