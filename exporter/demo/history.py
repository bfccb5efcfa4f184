"""The demo's software history (issue 59): finished runs of one workload across an NCCL and a driver upgrade, so
that the fleet's software comparison has something to find.

Twelve short runs of a Llama-7B-sized model on 8 H100s, posted and ended at the demo's start: four on NCCL 2.21.5,
four on NCCL 2.23.4 at 6 % lower MFU (a regression), four on NCCL 2.23.4 with a driver upgrade that costs nothing.
Each reports three one-minute intervals (``tokens`` over ``interval_seconds``), then ends with exit code 0; their
MFU sits above every alert's bar, and their series leave ``/metrics`` with their end, so they add only the
comparison's finding (``GET /v1/regressions``, ``MfumonSoftwareRegression``, /ui/regressions).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from mfumon import mfu as engine

#: The workload: 40 % MFU on 8 H100 SXM (the peak table's dense BF16 figure) at 6N FLOPs per token.
PARAMS = 6.74e9
NUM_GPUS = 8
GPU_MODEL = "NVIDIA H100 80GB HBM3"
_PEAK = engine.default_peak_table().lookup(GPU_MODEL, "bf16").peak_flops_per_gpu or 0.0
TOKENS_PER_SECOND = 0.40 * _PEAK * NUM_GPUS / (6 * PARAMS)
BASE = {"python": "3.11.7", "pytorch": "2.5.1+cu124", "cuda": "12.4", "nccl": "2.21.5", "driver": "550.54.15"}


@dataclass(frozen=True, slots=True)
class HistoryRun:
    job_id: str
    speed: float  # throughput relative to the old software's
    software: dict[str, str]


def history_runs() -> tuple[HistoryRun, ...]:
    """The twelve runs, oldest first; a run-to-run spread of a few tenths of a percent."""
    jitter = (1.0, 1.003, 0.997, 1.002)
    old = [HistoryRun(f"nightly-7b-{i}", jitter[i], BASE) for i in range(4)]
    nccl = {**BASE, "nccl": "2.23.4"}
    new = [HistoryRun(f"nightly-7b-{4 + i}", 0.94 * jitter[i], nccl) for i in range(4)]
    driver = {**nccl, "driver": "560.35.03"}
    newer = [HistoryRun(f"nightly-7b-{8 + i}", 0.94 * jitter[(i + 1) % 4], driver) for i in range(4)]
    return (*old, *new, *newer)


def seed_history(client: httpx.Client) -> int:
    """Post and end the history's runs; the number posted (a refused one is skipped: the demo goes on)."""
    posted = 0
    for run in history_runs():
        metadata = {
            "kind": "training",
            "name": "llama 7B nightly",
            "team": "foundation",
            "num_gpus": NUM_GPUS,
            "gpu_model": GPU_MODEL,
            "dtype": "bf16",
            "model": {"params": PARAMS},
            "software": run.software,
        }
        if client.put(f"/v1/jobs/{run.job_id}", json=metadata).status_code >= 400:
            continue
        for _ in range(3):
            report = {
                "tokens": round(TOKENS_PER_SECOND * run.speed * 60),
                "interval_seconds": 60.0,
                "step_seconds": 2.0,
            }
            client.post(f"/v1/jobs/{run.job_id}/reports", json=report)
        client.post(f"/v1/jobs/{run.job_id}/end", json={"exit_code": 0})
        posted += 1
    return posted
