"""A billed half hour for the chargeback's tests (``GET /v1/chargeback``, ``/ui/chargeback``, ``mfumon report
--chargeback``): prices set, two nodes whose GPUs carry jobs, idle and unreported work, job reports, and the
aggregator's billing run on a test clock.

- node ``gpu-01`` in pool ``train`` (priced): GPUs 0-3 job ``llama`` (team ``nlp``, reports), GPUs 4-5 job
  ``sweep`` (no reports: unreported busy), GPUs 6-7 idle;
- node ``gpu-02`` in pool ``free`` (no price: its GPU-hours are unpriced): GPUs 0-3 job ``vit`` (team ``vision``),
  GPUs 4-7 job ``orphan`` (no team).
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from mfumon.api.services.accounting import bill_gpu_states
from tests.utils.clock import Clock
from tests.utils.factories import gpu, report

T0 = 1_800_000_000.0
INTERVAL_SECONDS = 300.0
INTERVALS = 6
PRICE_PER_GPU_HOUR = 2.0
#: job -> (team, pool, node, its GPUs there)
JOBS: dict[str, tuple[str | None, str, str, range]] = {
    "llama": ("nlp", "train", "gpu-01", range(0, 4)),
    "vit": ("vision", "free", "gpu-02", range(0, 4)),
    "orphan": (None, "free", "gpu-02", range(4, 8)),
}
WATTS = 500.0


def _node_bodies(now: float, elapsed_seconds: float) -> dict[str, dict[str, Any]]:
    """Both nodes' samples: every GPU counts its energy (500 W busy, 80 W idle) since the start."""
    bodies = {}
    for node, pool in (("gpu-01", "train"), ("gpu-02", "free")):
        gpus = []
        for i in range(8):
            job = next((j for j, (_, _, n, r) in JOBS.items() if n == node and i in r), None)
            if node == "gpu-01" and i in (4, 5):
                job = "sweep"
            fields: dict[str, Any] = {"uuid": f"GPU-{node}-{i}", "energy_joules_total": 1e6 + WATTS * elapsed_seconds}
            if job is None:  # idle
                fields.update(utilization=0.0, sm_active=0.0, tensor_active=0.0, power_watts=80.0)
                fields["energy_joules_total"] = 1e6 + 80.0 * elapsed_seconds
            else:
                fields.update(job_id=job, power_watts=WATTS)
            gpus.append(gpu(i, **fields))
        bodies[node] = {"timestamp": now, "pool": pool, "gpus": gpus}
    return bodies


def bill_fleet(client: TestClient, *, kwh: float | None = None, currency: str = "EUR", priced: bool = True) -> Clock:
    """Set the prices (pool ``train`` at :data:`PRICE_PER_GPU_HOUR`, ``kwh`` per kWh or energy unpriced; none at all
    unless ``priced``), then run :data:`INTERVALS` intervals of samples, reports and billing. Returns the clock, at
    the end of the last one."""
    clock = Clock(client, start=T0)
    if priced:
        prices = {"currency": currency, "gpu_hour": {"pools": {"train": PRICE_PER_GPU_HOUR}}, "kwh": kwh}
        answer = client.put("/v1/prices", json=prices)
        assert answer.status_code == 200, answer.text
    ctx = client.app.state.ctx
    for k in range(INTERVALS + 1):
        for node, body in _node_bodies(clock.now, k * INTERVAL_SECONDS).items():
            answer = client.post(f"/v1/nodes/{node}/samples", json=body)
            assert answer.status_code == 200, answer.text
        if k < INTERVALS:
            for job_id, (team, pool, _, gpus) in JOBS.items():
                body = report(num_gpus=len(gpus), interval_seconds=INTERVAL_SECONDS, tokens=25_000 * 300, pool=pool)
                del body["tokens_per_second"]
                if team is not None:
                    body["team"] = team
                answer = client.post(f"/v1/jobs/{job_id}/reports", json=body)
                assert answer.status_code == 200, answer.text
        bill_gpu_states(ctx)
        if k < INTERVALS:
            clock.advance(INTERVAL_SECONDS)
    return clock
