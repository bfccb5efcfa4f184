"""One rank of a two-process CPU (gloo) training loop with a JobReporter, for test_live_gloo.py.

Usage: python -m tests.exporter.job.profile._gloo_worker RANK URL INIT_FILE TRACE_DIR STOP_FILE
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

from mfumon.exporter.job.reporter import JobReporter

JOB_ID = "gloo-profile"


def main() -> None:
    rank, url, init_file, trace_dir, stop_file = int(sys.argv[1]), *sys.argv[2:6]
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    reporter = JobReporter(
        JOB_ID,
        url=url,
        rank=rank,
        num_gpus=2,
        model={"params": 1_000_000},
        peak_flops_per_gpu=1e12,
        interval_seconds=0.3,
        profile_dir=trace_dir,
    )
    weights = torch.randn(192, 192)
    gradient = torch.randn(1 << 16)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        started = time.perf_counter()
        activations = weights @ weights
        stop = torch.tensor([1.0 if os.path.exists(stop_file) else 0.0])
        buffer = torch.cat([gradient + activations[0, 0] * 0, stop])
        dist.all_reduce(buffer)  # one collective per step: the gradient sync and the stop flag together
        reporter.step(tokens=4096, step_seconds=time.perf_counter() - started)
        if buffer[-1].item() > 0:
            break
        time.sleep(0.02)
    reporter.close(exit_code=0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
