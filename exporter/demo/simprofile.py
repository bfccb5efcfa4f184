"""A simulated on-demand profile for the demo: the demo asks its comm-bound job for a profile, and answers the
request it gets back in that job's report answers with summaries a real rank's summariser could have made.

It goes through the real path on the aggregator's side (``POST /v1/jobs/{id}/profile``, ``profile_request`` in the
report's answer, ``POST /v1/jobs/{id}/profiles``), so the profile metrics, the job's ``comm_source`` and the diagnosis
by parallelism have data without a GPU.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

logger = logging.getLogger(__name__)

STEPS = 5
STEP_SECONDS = 4.0


@dataclass(frozen=True)
class ProfileShape:
    """Shares of device time a job's simulated profile shows: per group (communication, exposed), per collective
    (name, group, communication, exposed, launches a step), idle and tensor cores."""

    groups: dict[str, tuple[float, float]]
    collectives: tuple[tuple[str, str, float, float, int], ...]
    idle: float
    tensor_core: float


#: The comm-bound job: tensor parallelism over a slow interconnect, data parallelism partly overlapped (the
#: diagnosis by parallelism has a case); the healthy job: data parallelism almost all hidden under compute (the job
#: board opens on it, and its profile panel has data).
PROFILED_JOBS: dict[str, ProfileShape] = {
    "finetune-13b-commbound": ProfileShape(
        groups={"tp": (0.38, 0.30), "dp": (0.20, 0.15)},
        collectives=(
            ("reduce_scatter", "tp", 0.20, 0.16, 80),
            ("allgather", "tp", 0.18, 0.14, 80),
            ("allreduce", "dp", 0.20, 0.15, 4),
        ),
        idle=0.04,
        tensor_core=0.72,
    ),
    "pretrain-llama3-8b": ProfileShape(
        groups={"dp": (0.14, 0.02)},
        collectives=(("allreduce", "dp", 0.14, 0.02, 4),),
        idle=0.02,
        tensor_core=0.86,
    ),
}


def summary(job_id: str, profile_id: int, rank: int) -> dict[str, Any]:
    """One rank's summary of ``STEPS`` steps, consistent with the job's simulated shares (45% exposed communication
    for the comm-bound job)."""
    shape = PROFILED_JOBS[job_id]
    span = STEPS * STEP_SECONDS
    comm = sum(c for c, _ in shape.groups.values()) * span
    exposed = sum(e for _, e in shape.groups.values()) * span
    idle = shape.idle * span
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
        "tensor_core_ratio": shape.tensor_core,
        "groups": [
            {"group": g, "comm_seconds": c * span, "exposed_seconds": e * span} for g, (c, e) in shape.groups.items()
        ],
        "collectives": [
            {"collective": name, "group": g, "comm_seconds": c * span, "exposed_seconds": e * span, "count": n * STEPS}
            for name, g, c, e, n in shape.collectives
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
        "trace_path": f"/tmp/mfumon-profiles/{job_id}-profile{profile_id}-rank{rank}.pt.trace.json.gz",
        "trace_bytes": 48_000_000,
    }


class DemoProfiler:
    """Asks each profiled job once, then answers the requests their report answers carry."""

    def __init__(self, ranks: dict[str, int]) -> None:
        self.ranks = ranks
        self.asked = False
        self.answered: set[tuple[str, int]] = set()

    def ask(self, client: httpx.Client) -> None:
        if self.asked:
            return
        self.asked = True
        for job_id in self.ranks:
            try:
                client.post(f"/v1/jobs/{job_id}/profile", json={"steps": STEPS, "ranks": "all"}).raise_for_status()
            except httpx.HTTPError as exc:
                logger.warning("asking %s for a profile failed: %s", job_id, exc)

    def on_answer(self, client: httpx.Client, job_id: str, answer: dict[str, Any] | None) -> None:
        """Answer a profile request found in a report's answer, as every rank of the job would."""
        request = (answer or {}).get("profile_request")
        if job_id not in self.ranks or not isinstance(request, dict) or (job_id, request.get("id")) in self.answered:
            return
        self.answered.add((job_id, int(request["id"])))
        for rank in range(self.ranks[job_id]):
            try:
                body = summary(job_id, int(request["id"]), rank)
                client.post(f"/v1/jobs/{job_id}/profiles", json=body).raise_for_status()
            except httpx.HTTPError as exc:
                logger.warning("simulated profile of %s rank %d failed: %s", job_id, rank, exc)
