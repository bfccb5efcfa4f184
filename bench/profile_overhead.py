"""What an on-demand profile costs a training loop (issue 32), and what it costs when no profile is asked.

Run: ``.venv/bin/python bench/profile_overhead.py [--steps N] [--calls N] [--device cpu|cuda] [--out DIR]``.

1. **Unprofiled step**: `ProfileAgent.on_step()` with no profile asked, against an empty method call (the same call
   shape), best of repeated ``timeit`` runs: the cost every step pays for the feature.
2. **Profiled step**: a small model's training step (matmul forward and backward, an SGD update; on CUDA in bf16)
   timed with and without the profiler, alternating blocks of steps so that drift falls on both: the median step
   with the profiler over the median without, for the profiled steps (the warm-up step and the asked steps, as the
   agent runs them). Then the one-off costs off the training thread: exporting the trace, summarising it, and its
   gzipped size.

Absolute times depend on the machine and on what else runs on it; the ratios are the result.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import torch

from mfumon.exporter.job.profile import ProfileAgent, ProfileRequest
from mfumon.exporter.job.profile._capture import Capture


class _Empty:
    def on_step(self) -> None:
        return None


def _idle_cost(calls: int) -> dict[str, float]:
    agent = ProfileAgent(job_id="bench", rank=0, world_size=1, send=lambda body: None, channel=lambda: None)
    empty = _Empty()
    repeat = 7
    agent_ns = min(timeit.repeat(agent.on_step, number=calls, repeat=repeat)) / calls * 1e9
    empty_ns = min(timeit.repeat(empty.on_step, number=calls, repeat=repeat)) / calls * 1e9
    return {"agent_on_step_ns": agent_ns, "empty_method_ns": empty_ns, "added_ns": agent_ns - empty_ns}


def _model(device: str) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor]:
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    width = 2048 if device == "cuda" else 384
    model = torch.nn.Sequential(
        torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
    ).to(device, dtype)
    batch = torch.randn(64, width, device=device, dtype=dtype)
    return model, torch.optim.SGD(model.parameters(), lr=1e-3), batch


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor, device: str) -> float:
    started = time.perf_counter()
    loss = model(batch).float().square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def _profiled_cost(device: str, steps: int, rounds: int) -> dict[str, Any]:
    model, optimizer, batch = _model(device)
    for _ in range(20):
        _step(model, optimizer, batch, device)
    plain: list[float] = []
    profiled: list[float] = []
    finish: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(rounds):
            plain += [_step(model, optimizer, batch, device) for _ in range(steps + 1)]
            capture = Capture(ProfileRequest(id=round_index + 1, steps=steps, ranks="all"), steps=steps)
            done = False
            while not done:
                started = time.perf_counter()
                _step(model, optimizer, batch, device)
                done = capture.step()
                profiled.append(time.perf_counter() - started)
            begun = time.perf_counter()
            result = capture.finish(Path(scratch), f"bench-{round_index}", max_trace_bytes=1 << 40)
            finish.append(
                {
                    "export_and_summary_seconds": time.perf_counter() - begun,
                    "trace_bytes_gzipped": float(result.trace_bytes),
                    "summary_compute_seconds": result.summary.compute_seconds,
                }
            )
    plain_median, profiled_median = statistics.median(plain), statistics.median(profiled)
    return {
        "device": device,
        "steps_per_profile": steps,
        "rounds": rounds,
        "plain_step_seconds_median": plain_median,
        "profiled_step_seconds_median": profiled_median,
        "profiled_over_plain": profiled_median / plain_median,
        "added_seconds_per_profiled_step": profiled_median - plain_median,
        "profiled_step_seconds_max": max(profiled),
        "export_and_summary_seconds_median": statistics.median(f["export_and_summary_seconds"] for f in finish),
        "trace_bytes_gzipped_median": statistics.median(f["trace_bytes_gzipped"] for f in finish),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per profile (default 10)")
    parser.add_argument("--rounds", type=int, default=5, help="profiles taken, alternating with plain steps")
    parser.add_argument("--calls", type=int, default=1_000_000, help="on_step calls timed per run")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, help="write the results as JSON here too")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {
        "machine": {"platform": platform.platform(), "torch": torch.__version__, "python": platform.python_version()},
        "unprofiled": _idle_cost(args.calls),
        "profiled": _profiled_cost(args.device, args.steps, args.rounds),
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"profile_overhead_{args.device}.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
