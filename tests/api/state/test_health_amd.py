"""AMD RAS/ECC events on the health checks (issue 35): what an amdsmi exporter sends maps onto the existing checks
where the meaning is the same (uncorrectable ECC, PCIe replays), and AMD's deferred errors get their own check.

Units on :func:`mfumon.api.state.health.advance`, then through the API on SQLite and PostgreSQL.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from mfumon.api.state.health import CHECKS, DRAIN_CHECKS, advance
from mfumon.api.state.views import GpuView, NodeView, build_node_view
from tests.utils.factories import metric_value, scrape

WINDOW_S = 900.0
UUID = "7eff74a0-0000-1000-808f-7e20764e2714"
MI300X = {"uuid": UUID, "index": 0, "name": "AMD Instinct MI300X", "utilization": 0.9, "dram_active": 0.4}


def _view(at: float, **counters: Any) -> NodeView:
    g = GpuView(
        uuid=UUID,
        node="n",
        index=0,
        name="AMD Instinct MI300X",
        mig_profile=None,
        job_id=None,
        up=True,
        counters=dict(counters),
        sample_timestamp=at,
        device="mi300x",
        bf16_peak_flops=1307.4e12,
        busy=True,
        hardware_mfu=None,
    )
    return build_node_view(
        name="n", pool="p", last_seen_at=at, last_sample_timestamp=at, samples_received=1, updated_at=at, gpus=(g,)
    )


def _checks(*samples: tuple[float, dict[str, Any]]) -> dict[str, bool]:
    held: NodeView | None = None
    for at, counters in samples:
        held = advance(held, _view(at, **counters), WINDOW_S)
    assert held is not None and held.health is not None
    return held.health.gpu_checks[UUID]


def test_deferred_errors_are_a_drain_check_of_their_own() -> None:
    check = CHECKS["ecc_deferred"]
    assert (check.scope, check.drain, "ecc_deferred" in DRAIN_CHECKS) == ("gpu", True, True)
    assert _checks((0.0, {"ecc_deferred_total": 4}), (10.0, {"ecc_deferred_total": 4}))["ecc_deferred"] is True
    assert _checks((0.0, {"ecc_deferred_total": 4}), (10.0, {"ecc_deferred_total": 5}))["ecc_deferred"] is False
    # An increase stops failing once it is older than the window.
    late = _checks(
        (0.0, {"ecc_deferred_total": 4}),
        (10.0, {"ecc_deferred_total": 5}),
        (10.0 + WINDOW_S + 1, {"ecc_deferred_total": 5}),
    )
    assert late["ecc_deferred"] is True


def test_amd_counters_with_the_same_meaning_use_the_existing_checks() -> None:
    checks = _checks(
        (0.0, {"ecc_uncorrected_total": 0, "pcie_replays_total": 3}),
        (10.0, {"ecc_uncorrected_total": 2, "pcie_replays_total": 9}),
    )
    assert checks["ecc_uncorrectable"] is False and checks["pcie_replays"] is False
    assert "ecc_deferred" not in checks  # not reported (an NVIDIA GPU, or UMC RAS disabled): left out, never passed
    assert not any(name.startswith(("nvlink", "row_remap")) for name in checks)


def test_an_amd_gpu_with_growing_deferred_errors_is_on_the_drain_list(client: TestClient) -> None:
    for deferred in (0, 1):
        body = {"timestamp": time.time(), "gpus": [{**MI300X, "ecc_deferred_total": deferred}]}
        assert client.post("/v1/nodes/amd-1/samples", json=body).status_code == 200
    health = client.get("/v1/nodes/amd-1").json()["health"]
    assert health["drain"] is True
    assert [(r["check"], r["uuid"]) for r in health["reasons"]] == [("ecc_deferred", UUID)]
    text = scrape(client)
    labels = {"node": "amd-1", "gpu": "0", "uuid": UUID}
    assert metric_value(text, "mfumon_gpu_ecc_deferred_total", **labels) == 1
    assert metric_value(text, "mfumon_gpu_health", **labels, check="ecc_deferred") == 0
    assert metric_value(text, "mfumon_gpu_hardware_mfu_ratio", **labels) is None  # no matrix-core counter on AMD
