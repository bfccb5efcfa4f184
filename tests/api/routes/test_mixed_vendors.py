"""A mixed NVIDIA/AMD cluster (issue 35): pools by vendor, each measured against its own devices' dense peak; an AMD
job's MFU stands alone (no matrix-core counter), and its cross-check says so. SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.clock import Clock
from tests.utils.factories import gpu, metric_value, report, scrape

MI300X_BF16 = 1307.4e12
H100_BF16 = 989e12


def _amd_gpu(index: int) -> dict[str, Any]:
    """What the amdsmi source sends for a busy MI300X: no tensor or SM activity counters exist on AMD."""
    return {
        "uuid": f"7eff74a0-0000-1000-808f-{index:012d}",
        "index": index,
        "name": "MI300X",  # amdsmi's market_name
        "job_id": "amd",
        "utilization": 0.98,
        "dram_active": 0.55,
        "memory_used_bytes": 150e9,
        "memory_total_bytes": 205e9,
        "power_watts": 640.0,
        "temperature_celsius": 71.0,
        "sm_clock_hz": 2.1e9,
        "max_sm_clock_hz": 2.1e9,
        "compute_processes": 1,
    }


def _push(client: TestClient, node: str, pool: str, gpus: list[dict[str, Any]], now: float) -> None:
    assert (
        client.post(f"/v1/nodes/{node}/samples", json={"timestamp": now, "pool": pool, "gpus": gpus}).status_code == 200
    )


def test_each_pool_is_measured_against_its_own_dense_peak(client: TestClient) -> None:
    clock = Clock(client)
    _push(client, "nv-1", "h100", [gpu(i, job_id="nv", tensor_active=0.4) for i in range(4)], clock.now)
    _push(client, "amd-1", "mi300x", [_amd_gpu(i) for i in range(4)], clock.now)
    nv = client.post("/v1/jobs/nv/reports", json=report(num_gpus=4, tokens_per_second=20_000.0)).json()
    body = report(num_gpus=4, tokens_per_second=20_000.0)
    del body["gpu_model"]  # the exporters name the device
    amd = client.post("/v1/jobs/amd/reports", json=body).json()

    assert (nv["device"], nv["peak_flops_per_gpu"]) == ("h100-sxm", H100_BF16)
    assert (amd["device"], amd["peak_flops_per_gpu"]) == ("mi300x", MI300X_BF16)
    # The same work is a smaller share of the bigger peak.
    assert amd["mfu"] == pytest.approx(nv["mfu"] * H100_BF16 / MI300X_BF16)

    pools = {p["name"]: p for p in client.get("/v1/cluster").json()["pools"]}
    assert pools["h100"]["peak_flops_per_second"] == pytest.approx(4 * H100_BF16)
    assert pools["mi300x"]["peak_flops_per_second"] == pytest.approx(4 * MI300X_BF16)
    assert pools["mi300x"]["mfu"] == pytest.approx(amd["mfu"])
    assert pools["mi300x"]["estimated_flops_per_second"] == 0.0  # nothing estimated from AMD hardware

    job = client.get("/v1/jobs/amd").json()
    assert job["hardware_mfu"] is None and job["mfu_hardware_agreement"] is None
    assert job["accounting"]["verdict"] == "unchecked"
    assert job["accounting"]["message"].startswith("no hardware counter")
    text = scrape(client)
    assert metric_value(text, "mfumon_gpu_hardware_mfu_ratio", node="amd-1", gpu="0") is None
    assert metric_value(text, "mfumon_gpu_hardware_mfu_ratio", node="nv-1", gpu="0") is not None
    assert metric_value(text, "mfumon_gpu_info", node="amd-1", gpu="0", model="MI300X") == 1
