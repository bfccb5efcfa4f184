"""A simulated on-demand profile for the demo: the demo asks its comm-bound job for a profile, and answers the
request it gets back in that job's report answers with summaries a real rank's summariser could have made.

It goes through the real path on the aggregator's side (``POST /v1/jobs/{id}/profile``, ``profile_request`` in the
report's answer, ``POST /v1/jobs/{id}/profiles``), so the profile metrics, the job's ``comm_source`` and the diagnosis
by parallelism have data without a GPU.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

logger = logging.getLogger(__name__)

PROFILED_JOB = "finetune-13b-commbound"
STEPS = 5
STEP_SECONDS = 4.0
# Shares of device time: tensor parallelism over a slow interconnect, data parallelism partly overlapped.
_GROUPS = {"tp": (0.38, 0.30), "dp": (0.20, 0.15)}
_IDLE = 0.04
_TENSOR_CORE = 0.72


def summary(profile_id: int, rank: int) -> dict[str, Any]:
    """One rank's summary of ``STEPS`` steps, consistent with the job's simulated 45% exposed communication."""
    span = STEPS * STEP_SECONDS
    comm = sum(c for c, _ in _GROUPS.values()) * span
    exposed = sum(e for _, e in _GROUPS.values()) * span
    idle = _IDLE * span
    per_step = [
        {
            "step": 1000 + i,
            "span_seconds": STEP_SECONDS,
            "compute_seconds": (span - exposed - idle) / STEPS,
            "comm_seconds": comm / STEPS,
            "exposed_comm_seconds": exposed / STEPS,
            "idle_seconds": idle / STEPS,
        }
        for i in range(STEPS)
    ]
    return {
        "profile_id": profile_id,
        "rank": rank,
        "span_seconds": span,
        "compute_seconds": span - exposed - idle,
        "comm_seconds": comm,
        "exposed_comm_seconds": exposed,
        "idle_seconds": idle,
        "tensor_core_ratio": _TENSOR_CORE,
        "groups": [
            {"group": g, "comm_seconds": c * span, "exposed_seconds": e * span} for g, (c, e) in _GROUPS.items()
        ],
        "collectives": [
            {
                "collective": "reduce_scatter",
                "group": "tp",
                "comm_seconds": 0.2 * span,
                "exposed_seconds": 0.16 * span,
                "count": 80 * STEPS,
            },
            {
                "collective": "allgather",
                "group": "tp",
                "comm_seconds": 0.18 * span,
                "exposed_seconds": 0.14 * span,
                "count": 80 * STEPS,
            },
            {
                "collective": "allreduce",
                "group": "dp",
                "comm_seconds": 0.2 * span,
                "exposed_seconds": 0.15 * span,
                "count": 4 * STEPS,
            },
        ],
        "steps": per_step,
        "top_kernels": [
            {
                "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64",
                "seconds": 0.41 * span,
                "count": 640 * STEPS,
            },
            {"name": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "seconds": 0.2 * span, "count": 80 * STEPS},
            {"name": "flash_fwd_kernel", "seconds": 0.08 * span, "count": 40 * STEPS},
        ],
        "trace_path": f"/tmp/mfumon-profiles/{PROFILED_JOB}-profile{profile_id}-rank{rank}.pt.trace.json.gz",
        "trace_bytes": 48_000_000,
    }


class DemoProfiler:
    """Asks once, then answers the request the job's report answers carry."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.asked = False
        self.answered: set[int] = set()

    def ask(self, client: httpx.Client) -> None:
        if self.asked:
            return
        self.asked = True
        try:
            client.post(f"/v1/jobs/{PROFILED_JOB}/profile", json={"steps": STEPS, "ranks": "all"}).raise_for_status()
        except httpx.HTTPError as exc:
            logger.warning("asking %s for a profile failed: %s", PROFILED_JOB, exc)

    def on_answer(self, client: httpx.Client, job_id: str, answer: dict[str, Any] | None) -> None:
        """Answer a profile request found in a report's answer, as every rank of the job would."""
        request = (answer or {}).get("profile_request")
        if job_id != PROFILED_JOB or not isinstance(request, dict) or request.get("id") in self.answered:
            return
        self.answered.add(int(request["id"]))
        for rank in range(self.ranks):
            try:
                body = summary(int(request["id"]), rank)
                client.post(f"/v1/jobs/{job_id}/profiles", json=body).raise_for_status()
            except httpx.HTTPError as exc:
                logger.warning("simulated profile of %s rank %d failed: %s", job_id, rank, exc)
