"""Fleet health through the public API: GPU and node checks, the drain list, job health, idle energy and faults.

Every test runs on SQLite and PostgreSQL (the ``client`` fixture), as every input test does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import gpu, ib_port, metric_value, node_sample, report, scrape


def _push(client: TestClient, node: str, body: dict[str, Any]) -> None:
    response = client.post(f"/v1/nodes/{node}/samples", json=body)
    assert response.status_code == 200, response.text


def _sample(
    gpus: list[dict[str, Any]],
    *,
    ports: list[dict[str, Any]] | None = None,
    t: float | None = None,
    pool: str = "train",
) -> dict[str, Any]:
    body: dict[str, Any] = {"timestamp": t or time.time(), "pool": pool, "gpus": gpus}
    if ports is not None:
        body["ib_ports"] = ports
    return body


def test_new_gpu_counters_and_ports_become_series_and_absent_ones_stay_absent(client: TestClient) -> None:
    counters = {
        "nvlink_crc_flit_errors_total": 3,
        "nvlink_replay_errors_total": 7,
        "pcie_replays_total": 2,
        "remapped_rows_correctable_total": 1,
        "remapped_rows_uncorrectable_total": 0,
        "row_remap_pending": 0,
        "row_remap_failure": 0,
        "energy_joules_total": 2674.357,
        "last_xid": 0,
    }
    _push(client, "n1", _sample([gpu(0, **counters), gpu(1)], ports=[ib_port(), ib_port("mlx5_1", state="DOWN")]))
    text = scrape(client)
    ident = {"node": "n1", "gpu": "0"}
    assert metric_value(text, "mfumon_gpu_nvlink_replay_errors_total", **ident) == 7
    assert metric_value(text, "mfumon_gpu_pcie_replays_total", **ident) == 2
    assert metric_value(text, "mfumon_gpu_energy_joules_total", **ident) == pytest.approx(2674.357)
    assert metric_value(text, "mfumon_gpu_row_remap_pending", **ident) == 0
    # Not reported (unsupported): no series and no check, never 0.
    assert metric_value(text, "mfumon_gpu_nvlink_crc_data_errors_total", **ident) is None
    assert metric_value(text, "mfumon_gpu_pcie_replays_total", node="n1", gpu="1") is None
    assert metric_value(text, "mfumon_gpu_health", node="n1", gpu="1", check="pcie_replays") is None
    assert metric_value(text, "mfumon_gpu_health", node="n1", gpu="1", check="responsive") == 1
    assert metric_value(text, "mfumon_gpu_health", check="pcie_replays", **ident) == 1
    port = {"node": "n1", "device": "mlx5_0", "port": "1"}
    assert metric_value(text, "mfumon_ib_port_transmit_bytes_total", **port) == 4 * 2880761508848
    assert metric_value(text, "mfumon_ib_port_rate_bytes_per_second", **port) == 50e9
    assert metric_value(text, "mfumon_ib_port_info", link_layer="InfiniBand", **port) == 1
    assert metric_value(text, "mfumon_ib_port_active", node="n1", device="mlx5_1", port="1") == 0
    # A port that is not ACTIVE puts the node on the drain list.
    assert metric_value(text, "mfumon_node_health", node="n1", check="ib_ports_active") == 0
    assert metric_value(text, "mfumon_node_drain", node="n1", reason="ib_ports_active") == 1
    node = client.get("/v1/nodes/n1").json()
    assert node["ib_ports"][1]["state"] == "DOWN"
    assert node["health"]["drain"] is True
    assert node["health"]["reasons"][0]["ports"] == ["mlx5_1:1"]


def test_pending_row_remap_puts_the_node_on_the_drain_list_with_its_reason(client: TestClient) -> None:
    _push(client, "healthy", _sample([gpu(0), gpu(1)], ports=[ib_port()]))
    _push(client, "remap", _sample([gpu(0), gpu(1, row_remap_pending=1, remapped_rows_uncorrectable_total=1)]))
    _push(client, "warm", _sample([gpu(0, throttle_reasons=["hw_thermal"])]))
    unhealthy = client.get("/v1/nodes", params={"unhealthy": "true"}).json()
    assert [n["name"] for n in unhealthy["data"]] == ["remap", "warm"]
    drain = client.get("/v1/nodes", params={"drain": "true"}).json()["data"]
    assert [n["name"] for n in drain] == ["remap"]
    (reason,) = drain[0]["health"]["reasons"]
    assert (reason["check"], reason["gpu"], reason["drain"]) == ("row_remap_pending", 1, True)
    assert "reset" in reason["meaning"]
    assert drain[0]["gpus"][1]["health"]["row_remap_pending"] is False
    warm = unhealthy["data"][1]["health"]
    assert (warm["healthy"], warm["drain"], warm["reasons"][0]["check"]) == (False, False, "thermal")
    text = scrape(client)
    assert metric_value(text, "mfumon_node_drain", node="remap", reason="row_remap_pending") == 1
    assert metric_value(text, "mfumon_node_drain", node="warm") is None
    assert metric_value(text, "mfumon_node_healthy", node="healthy") == 1
    assert metric_value(text, "mfumon_node_healthy", node="warm") == 0
    assert metric_value(text, "mfumon_gpu_health", node="remap", gpu="1", check="row_remap_pending") == 0
    for status, count in (("healthy", 1), ("degraded", 1), ("drain", 1)):
        assert metric_value(text, "mfumon_cluster_nodes_by_health", status=status) == count


@pytest.mark.parametrize(
    ("counters", "check"),
    [
        ({"ecc_uncorrected_total": 1}, "ecc_uncorrectable"),
        ({"row_remap_failure": 1}, "row_remap_failure"),
        ({"last_xid": 79}, "xid"),
        ({"up": False}, "responsive"),
    ],
)
def test_each_drain_reason(client: TestClient, counters: dict[str, Any], check: str) -> None:
    _push(client, "n", _sample([gpu(0), gpu(1, **counters)]))
    node = client.get("/v1/nodes", params={"drain": "true"}).json()["data"][0]
    assert [(r["check"], r["gpu"]) for r in node["health"]["reasons"]] == [(check, 1)]


def test_an_application_xid_does_not_drain(client: TestClient) -> None:
    _push(client, "n", _sample([gpu(0, last_xid=13)]))  # graphics engine exception: the job's bug, not the GPU's
    assert client.get("/v1/nodes", params={"unhealthy": "true"}).json()["count"] == 0


def test_error_counters_fail_while_they_grow_and_pass_after_the_window(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(HEALTH_WINDOW_SECONDS=1.0)
    ports = [ib_port(), ib_port("mlx5_1")]
    _push(client, "n", _sample([gpu(0, nvlink_replay_errors_total=5, nvlink_recovery_errors_total=0)], ports=ports))
    assert client.get("/v1/nodes/n").json()["health"]["healthy"] is True  # totals alone do not fail a check
    flapped = [ib_port(), ib_port("mlx5_1", link_downed_total=1, symbol_errors_total=40)]
    _push(client, "n", _sample([gpu(0, nvlink_replay_errors_total=9, nvlink_recovery_errors_total=0)], ports=flapped))
    health = client.get("/v1/nodes/n").json()["health"]
    assert {r["check"] for r in health["reasons"]} == {"ib_link_flapping", "ib_errors", "nvlink_errors"}
    assert health["drain"] is True and health["checks"]["ib_link_flapping"] is False
    time.sleep(1.3)  # the window passes with the counters flat: the node is healthy again
    _push(client, "n", _sample([gpu(0, nvlink_replay_errors_total=9, nvlink_recovery_errors_total=0)], ports=flapped))
    assert client.get("/v1/nodes/n").json()["health"]["healthy"] is True
    _push(client, "n", _sample([gpu(0, nvlink_replay_errors_total=9, nvlink_recovery_errors_total=2)], ports=flapped))
    reasons = client.get("/v1/nodes/n").json()["health"]["reasons"]
    assert [(r["check"], r["drain"]) for r in reasons] == [("nvlink_recovery", True)]


def _idle(index: int, **counters: Any) -> dict[str, Any]:
    """A GPU in state idle: up, no job, no compute process."""
    return gpu(index, utilization=0.0, sm_active=0.0, tensor_active=0.0, compute_processes=0, **counters)


def test_idle_energy_and_idle_time_count_only_idle_gpus_between_samples(client: TestClient) -> None:
    t0 = time.time() - 60
    unattributed = {"compute_processes": 1}  # busy with no job id: "unreported", not idle
    first = [
        _idle(0, energy_joules_total=1000.0),
        gpu(1, energy_joules_total=1000.0, job_id="busy"),
        gpu(2, energy_joules_total=1000.0, **unattributed),
    ]
    second = [
        _idle(0, energy_joules_total=1700.0),
        gpu(1, energy_joules_total=5000.0, job_id="busy"),
        gpu(2, energy_joules_total=4000.0, **unattributed),
    ]
    _push(client, "n", _sample(first, t=t0, pool="p"))
    _push(client, "n", _sample(second, t=t0 + 10, pool="p"))
    _push(client, "m", _sample([_idle(0, energy_joules_total=10.0)], t=t0, pool="p"))  # one sample: no interval yet
    text = scrape(client)
    assert metric_value(text, "mfumon_pool_idle_energy_joules_total", pool="p") == pytest.approx(700.0)
    assert metric_value(text, "mfumon_pool_idle_gpu_seconds_total", pool="p") == pytest.approx(10.0)
    # A replayed older sample changes nothing; a driver reload (energy going down) adds time but no energy.
    _push(client, "n", _sample(first, t=t0 + 5, pool="p"))
    _push(client, "n", _sample([_idle(0, energy_joules_total=3.0), *second[1:]], t=t0 + 20, pool="p"))
    text = scrape(client)
    assert metric_value(text, "mfumon_pool_idle_energy_joules_total", pool="p") == pytest.approx(700.0)
    assert metric_value(text, "mfumon_pool_idle_gpu_seconds_total", pool="p") == pytest.approx(20.0)


def test_a_gpu_that_starts_failing_a_drain_check_counts_one_fault(client: TestClient) -> None:
    _push(client, "n", _sample([gpu(0), gpu(1)], pool="p"))
    assert metric_value(scrape(client), "mfumon_pool_gpu_faults_total", pool="p") == 0
    for _ in range(2):  # still failing: still one fault
        _push(client, "n", _sample([gpu(0), gpu(1, row_remap_pending=1, last_xid=63)], pool="p"))
    _push(client, "n", _sample([gpu(0, ecc_uncorrected_total=1), gpu(1, row_remap_pending=1)], pool="p"))
    assert metric_value(scrape(client), "mfumon_pool_gpu_faults_total", pool="p") == 2


def test_job_json_names_its_unhealthy_and_throttled_gpus_and_nodes(client: TestClient) -> None:
    ports = [ib_port(), ib_port("mlx5_1", state="DOWN", phys_state="Polling")]
    _push(
        client, "a", _sample([gpu(0, job_id="j"), gpu(1, job_id="j", throttle_reasons=["sw_power_cap"])], ports=ports)
    )
    _push(client, "b", _sample([gpu(0, job_id="j", pcie_replays_total=1), gpu(1, job_id="other", row_remap_pending=1)]))
    client.post("/v1/jobs/j/reports", json=report(num_gpus=4))
    health = client.get("/v1/jobs/j").json()["health"]
    assert health["healthy"] is False
    assert health["unhealthy_nodes"] == [{"node": "a", "failing": ["ib_ports_active"], "drain": True}]
    assert health["throttled_gpus"] == [{"node": "a", "gpu": 1, "uuid": gpu(1)["uuid"], "reasons": ["sw_power_cap"]}]
    assert health["unhealthy_gpus"] == []  # the pending remap is on another job's GPU
    client.post("/v1/jobs/other/reports", json=report(num_gpus=1))
    other = client.get("/v1/jobs/other").json()["health"]
    assert other["unhealthy_gpus"] == [
        {"node": "b", "gpu": 1, "uuid": gpu(1)["uuid"], "failing": ["row_remap_pending"], "drain": True}
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"ib_ports": [ib_port(), ib_port()]},  # the same port twice
        {"ib_ports": [ib_port(link_downed_total=-1)]},
        {"ib_ports": [ib_port(color="blue")]},
        {"ib_ports": [ib_port(device="mlx5 0")]},
        {"gpus": [gpu(0, row_remap_pending=2)]},
        {"gpus": [gpu(0, energy_joules_total=float("nan"))]},
    ],
)
def test_bad_health_input_is_refused_and_changes_nothing(client: TestClient, bad: dict[str, Any]) -> None:
    body = {**node_sample(1), **bad}
    response = client.post(
        "/v1/nodes/n/samples",
        content=json.dumps(body, allow_nan=True),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert client.get("/v1/nodes/n").status_code == 404


def test_a_replica_that_did_not_receive_the_pushes_shows_the_same_drain_list(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("replicas share one PostgreSQL (LISTEN/NOTIFY); SQLite serves one process")
    writer = make_client()
    reader = make_client(REFRESH_INTERVAL_SECONDS=0.2)
    _push(writer, "n", _sample([gpu(0, row_remap_pending=1)], ports=[ib_port(state="DOWN")]))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        listed = reader.get("/v1/nodes", params={"drain": "true"}).json()["data"]
        if listed:
            break
        time.sleep(0.1)
    assert [n["name"] for n in listed] == ["n"]
    assert {r["check"] for r in listed[0]["health"]["reasons"]} == {"row_remap_pending", "ib_ports_active"}
    assert listed[0]["ib_ports"][0]["state"] == "DOWN"


def test_concurrent_pushes_count_idle_energy_exactly_once(client: TestClient) -> None:
    t0 = time.time() - 100
    nodes, steps = 6, 4

    def push(node: int) -> None:
        for step in range(steps):
            body = _sample([_idle(0, energy_joules_total=100.0 * step)], t=t0 + step, pool="p", ports=[ib_port()])
            _push(client, f"node-{node}", body)

    threads = [threading.Thread(target=push, args=(i,)) for i in range(nodes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = scrape(client)
    assert metric_value(text, "mfumon_pool_idle_energy_joules_total", pool="p") == pytest.approx(nodes * 300.0)
    assert metric_value(text, "mfumon_pool_idle_gpu_seconds_total", pool="p") == pytest.approx(nodes * 3.0)
