"""The ``fabric`` and ``pcie_downtrained`` checks (issue 53).

``fabric``: the GPU's NVLink fabric health summary (NVML ``healthSummary``, DCGM 175: 2 unhealthy, 3 limited
capacity), its health mask (174: 2-bit fields, degraded bandwidth at bit 0, route unhealthy at bit 4) and the fabric
manager's status (170: 4 Failure). A drain check. ``pcie_downtrained``: a PCIe link below its maximum width at any
load, or below its maximum generation while the GPU is busy (an idle GPU drops to Gen1 to save power). Not a drain.

Units on :func:`mfumon.api.state.health.advance`, then each check through the API (the ``client`` fixture).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.state.health import CHECKS, DRAIN_CHECKS, advance
from mfumon.api.state.views import GpuView, NodeView, build_node_view
from tests.utils.factories import gpu, metric_value, scrape

WINDOW_S = 900.0
UUID = "GPU-unit"
IDLE = {"utilization": 0.0, "sm_active": 0.0, "compute_processes": 0}
BUSY = {"utilization": 0.9, "sm_active": 0.7, "compute_processes": 1}
GEN5_X16 = {"pcie_link_gen_max": 5, "pcie_link_width_max": 16}
# NVML_GPU_FABRIC_HEALTH_MASK_*: every field supported and false (2) ...
MASK_ALL_FALSE = 2 << 0 | 2 << 2 | 2 << 4 | 2 << 6
MASK_DEGRADED_BW = 1 << 0 | 2 << 2 | 2 << 4 | 2 << 6  # ... bandwidth degraded
MASK_ROUTE_UNHEALTHY = 2 << 0 | 2 << 2 | 1 << 4 | 2 << 6  # ... a route unhealthy
MASK_ROUTE_RECOVERY = 2 << 0 | 1 << 2 | 2 << 4 | 2 << 6  # ... a route recovering (in progress, not a failure)


def _view(at: float, **counters: Any) -> NodeView:
    g = GpuView(
        uuid=UUID,
        node="n",
        index=0,
        name="NVIDIA B200",
        mig_profile=None,
        job_id=None,
        up=True,
        counters=dict(counters),
        sample_timestamp=at,
        device=None,
        bf16_peak_flops=None,
        busy=False,
        hardware_mfu=None,
    )
    return build_node_view(
        name="n", pool="p", last_seen_at=at, last_sample_timestamp=at, samples_received=1, updated_at=at, gpus=(g,)
    )


def _run(*samples: dict[str, Any]) -> list[NodeView]:
    """Feed the counters through :func:`advance` 10 s apart, as the state does; every view after."""
    held: NodeView | None = None
    out = []
    for k, counters in enumerate(samples):
        held = advance(held, _view(10.0 * k, **counters), WINDOW_S)
        out.append(held)
    return out


def _verdict(check: str, **counters: Any) -> bool | None:
    (view,) = _run(counters)
    assert view.health is not None
    return view.health.gpu_checks[UUID].get(check)


def test_fabric_drains_and_pcie_downtrained_degrades() -> None:
    assert (CHECKS["fabric"].scope, "fabric" in DRAIN_CHECKS) == ("gpu", True)
    assert (CHECKS["pcie_downtrained"].scope, "pcie_downtrained" in DRAIN_CHECKS) == ("gpu", False)


# --- fabric --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counters", "verdict"),
    [
        pytest.param({}, None, id="nothing-sent"),
        pytest.param({"fabric_health_summary": 0}, None, id="summary-not-supported"),
        pytest.param(
            {"fabric_health_summary": 0, "fabric_manager_status": 0, "fabric_health_mask": 0}, None, id="all-0"
        ),
        pytest.param({"fabric_health_summary": 1}, True, id="healthy"),
        pytest.param({"fabric_health_summary": 2}, False, id="unhealthy"),
        pytest.param({"fabric_health_summary": 3}, False, id="limited-capacity"),
        pytest.param({"fabric_manager_status": 3}, True, id="manager-success"),
        pytest.param({"fabric_manager_status": 2}, True, id="manager-in-progress"),
        pytest.param({"fabric_health_summary": 1, "fabric_manager_status": 4}, False, id="manager-failure"),
        pytest.param({"fabric_health_summary": 0, "fabric_manager_status": 4}, False, id="manager-failure-no-summary"),
        pytest.param({"fabric_manager_status": 0}, None, id="manager-not-supported"),
        pytest.param({"fabric_health_mask": MASK_ALL_FALSE}, True, id="mask-all-false"),
        pytest.param({"fabric_health_mask": MASK_DEGRADED_BW}, False, id="mask-degraded-bandwidth"),
        pytest.param({"fabric_health_mask": MASK_ROUTE_UNHEALTHY}, False, id="mask-route-unhealthy"),
        pytest.param({"fabric_health_mask": MASK_ROUTE_RECOVERY}, True, id="mask-route-recovery"),
        pytest.param(
            {"fabric_health_summary": 1, "fabric_health_mask": MASK_DEGRADED_BW}, False, id="mask-over-summary"
        ),
    ],
)
def test_fabric_verdict(counters: dict[str, Any], verdict: bool | None) -> None:
    assert _verdict("fabric", **counters) is verdict


def test_an_unhealthy_fabric_drains_the_node_and_counts_one_fault() -> None:
    healthy, unhealthy, again = _run(
        {"fabric_health_summary": 1}, {"fabric_health_summary": 2}, {"fabric_health_summary": 2}
    )
    assert healthy.health is not None and healthy.health.healthy
    health = unhealthy.health
    assert health is not None and health.drain and health.drain_reasons == ("fabric",)
    (reason,) = health.reasons
    assert (reason["check"], reason["gpu"], reason["drain"]) == ("fabric", 0, True)
    assert health.faults == 1
    assert again.health is not None and again.health.faults == 0 and again.health.drain


# --- PCIe link -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counters", "verdict"),
    [
        pytest.param({**IDLE, **GEN5_X16, "pcie_link_gen": 1, "pcie_link_width": 16}, True, id="idle-gen1-x16"),
        pytest.param({**IDLE, "pcie_link_gen": 1, "pcie_link_gen_max": 5}, None, id="idle-gen1-no-width"),
        pytest.param({**BUSY, **GEN5_X16, "pcie_link_gen": 4, "pcie_link_width": 16}, False, id="busy-gen4-of-5"),
        pytest.param({**BUSY, "pcie_link_gen": 4, "pcie_link_gen_max": 5}, False, id="busy-gen4-no-width"),
        pytest.param({**BUSY, **GEN5_X16, "pcie_link_gen": 5, "pcie_link_width": 16}, True, id="busy-full"),
        pytest.param({**IDLE, **GEN5_X16, "pcie_link_gen": 1, "pcie_link_width": 8}, False, id="idle-x8-of-x16"),
        pytest.param({**BUSY, **GEN5_X16, "pcie_link_gen": 5, "pcie_link_width": 8}, False, id="busy-x8-of-x16"),
        pytest.param({**BUSY, "pcie_link_gen": 4, "pcie_link_gen_max": 4}, True, id="gen5-gpu-in-a-gen4-system"),
        pytest.param({"utilization": 0.2, "pcie_link_gen": 3, "pcie_link_gen_max": 5}, False, id="busy-by-utilization"),
        pytest.param({"sm_active": 0.1, "pcie_link_gen": 3, "pcie_link_gen_max": 5}, False, id="busy-by-sm-active"),
        pytest.param({"compute_processes": 2, "pcie_link_gen": 3, "pcie_link_gen_max": 5}, False, id="busy-by-process"),
        pytest.param({**BUSY, "pcie_link_gen": 4}, None, id="no-maximum"),
        pytest.param({**BUSY, "pcie_link_width": 8}, None, id="no-width-maximum"),
        pytest.param(dict(BUSY), None, id="nothing-sent"),
    ],
)
def test_pcie_downtrained_verdict(counters: dict[str, Any], verdict: bool | None) -> None:
    assert _verdict("pcie_downtrained", **counters) is verdict


def test_a_downtrained_link_degrades_the_node_without_draining_it() -> None:
    (view,) = _run({**BUSY, **GEN5_X16, "pcie_link_gen": 5, "pcie_link_width": 8})
    health = view.health
    assert health is not None
    assert not health.healthy and not health.drain and health.faults == 0
    (reason,) = health.reasons
    assert (reason["check"], reason["drain"]) == ("pcie_downtrained", False)


def test_the_same_link_is_judged_again_when_the_gpu_turns_busy() -> None:
    """The shortcut must not reuse an idle GPU's verdict on a Gen1 link once the GPU works (same link figures)."""
    link = {**GEN5_X16, "pcie_link_gen": 1, "pcie_link_width": 16}
    idle, busy, idle_again = _run({**IDLE, **link}, {**BUSY, **link}, {**IDLE, **link})
    verdicts = [v.health.gpu_checks[UUID]["pcie_downtrained"] for v in (idle, busy, idle_again) if v.health]
    assert verdicts == [True, False, True]


def test_a_busy_gpu_at_full_link_reuses_its_checks_whatever_its_utilization() -> None:
    """Utilization differs on every push; the verdict it feeds does not, so the shortcut still applies."""
    link = {**GEN5_X16, "pcie_link_gen": 5, "pcie_link_width": 16, "fabric_health_summary": 1}
    first, second = _run({**BUSY, **link}, {**BUSY, **link, "utilization": 0.42, "sm_active": 0.31})
    assert first.health is not None and second.health is not None
    assert second.health.gpu_checks[UUID] is first.health.gpu_checks[UUID]


# --- through the API ---------------------------------------------------------------------------------------------


def _push(client: TestClient, node: str, gpus: list[dict[str, Any]]) -> None:
    response = client.post(f"/v1/nodes/{node}/samples", json={"timestamp": time.time(), "pool": "p", "gpus": gpus})
    assert response.status_code == 200, response.text


def test_both_checks_through_the_api_and_the_series(client: TestClient) -> None:
    _push(
        client,
        "n",
        [
            gpu(0, pcie_link_gen=4, pcie_link_gen_max=5, pcie_link_width=16, pcie_link_width_max=16),  # busy
            gpu(1, fabric_health_summary=3, fabric_manager_status=3, fabric_health_mask=MASK_DEGRADED_BW),
            gpu(2, fabric_health_summary=0, pcie_link_gen=1, pcie_link_gen_max=5, **IDLE),
        ],
    )
    (node,) = client.get("/v1/nodes", params={"drain": "true"}).json()["data"]
    assert sorted((r["check"], r["gpu"], r["drain"]) for r in node["health"]["reasons"]) == [
        ("fabric", 1, True),
        ("pcie_downtrained", 0, False),
    ]
    health = [g["health"] for g in node["gpus"]]
    assert health[0]["pcie_downtrained"] is False and "fabric" not in health[0]
    assert health[1]["fabric"] is False and "pcie_downtrained" not in health[1]
    assert "fabric" not in health[2] and "pcie_downtrained" not in health[2]
    text = scrape(client)
    assert metric_value(text, "mfumon_gpu_health", node="n", gpu="0", check="pcie_downtrained") == 0
    assert metric_value(text, "mfumon_gpu_health", node="n", gpu="1", check="fabric") == 0
    assert metric_value(text, "mfumon_gpu_health", node="n", gpu="2", check="fabric") is None
    assert metric_value(text, "mfumon_node_drain", node="n", reason="fabric") == 1
    assert metric_value(text, "mfumon_node_drain", node="n", reason="pcie_downtrained") is None
