"""The ``row_remap_uncorrectable`` check: HBM rows remapped for *uncorrectable* errors (NVML's ``uncRows``,
``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS``; the exporters send ``remapped_rows_uncorrectable_total``) grew within the
health window. A drain check: the remap only takes effect at the next GPU reset.

Units on :func:`mfumon.api.state.health.advance` (clock and window set exactly), then the same cases through the API on
SQLite and PostgreSQL (the ``client`` fixture), as the rest of ``test_health.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.state.health import CHECKS, DRAIN_CHECKS, advance
from mfumon.api.state.views import GpuView, NodeView, build_node_view
from tests.utils.factories import gpu, metric_value, scrape

CHECK = "row_remap_uncorrectable"
COUNTER = "remapped_rows_uncorrectable_total"
WINDOW_S = 900.0
UUID = "GPU-unit"


def _view(at: float, **counters: Any) -> NodeView:
    """A one-GPU node as the state holds it after a push at ``at``: ``counters`` as the exporter sent them."""
    g = GpuView(
        uuid=UUID,
        node="n",
        index=0,
        name="NVIDIA A100-SXM4-80GB",
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


def _run(*samples: tuple[float, dict[str, Any]]) -> list[NodeView]:
    """Feed the samples ``(at, counters)`` through :func:`advance` in order, as the state does; every view after."""
    held: NodeView | None = None
    out = []
    for at, counters in samples:
        held = advance(held, _view(at, **counters), WINDOW_S)
        out.append(held)
    return out


def _verdict(view: NodeView) -> bool | None:
    assert view.health is not None
    return view.health.gpu_checks[UUID].get(CHECK)


def test_the_check_is_a_drain_check_whose_meaning_says_a_reset_is_needed() -> None:
    check = CHECKS[CHECK]
    assert (check.scope, check.drain, CHECK in DRAIN_CHECKS) == ("gpu", True, True)
    assert "uncorrectable" in check.meaning and "reset" in check.meaning


def test_an_increase_fails_the_check_drains_the_node_and_counts_one_fault() -> None:
    before, after = _run((0.0, {COUNTER: 0}), (10.0, {COUNTER: 1}))
    assert _verdict(before) is True
    assert _verdict(after) is False
    health = after.health
    assert health is not None
    assert health.drain and health.drain_reasons == (CHECK,)
    (reason,) = health.reasons
    assert (reason["check"], reason["gpu"], reason["uuid"], reason["drain"]) == (CHECK, 0, UUID, True)
    assert reason["meaning"] == CHECKS[CHECK].meaning
    assert health.faults == 1


def test_it_keeps_failing_within_the_window_and_passes_once_the_window_has_passed() -> None:
    views = _run(
        (0.0, {COUNTER: 0}),
        (10.0, {COUNTER: 2}),
        (10.0 + WINDOW_S - 1, {COUNTER: 2}),  # flat since, but the increase is still within the window
        (10.0 + WINDOW_S + 1, {COUNTER: 2}),
    )
    assert [_verdict(v) for v in views] == [True, False, False, True]
    assert [v.health.faults for v in views if v.health is not None] == [0, 1, 0, 0]  # one fault, not one per sample


def test_a_constant_nonzero_count_passes() -> None:
    """An old remap (recorded before this aggregator saw the GPU, or long ago) does not fail forever."""
    views = _run((0.0, {COUNTER: 3}), (10.0, {COUNTER: 3}), (20.0, {COUNTER: 3}))
    assert [_verdict(v) for v in views] == [True, True, True]
    assert all(v.health is not None and v.health.healthy for v in views)


def test_a_counter_that_goes_down_does_not_fail_and_counts_again_from_its_new_value() -> None:
    """A lower value (driver reload, a rebuilt exporter's first read) is not an increase; growth after it is."""
    views = _run((0.0, {COUNTER: 3}), (10.0, {COUNTER: 0}), (20.0, {COUNTER: 0}), (30.0, {COUNTER: 1}))
    assert [_verdict(v) for v in views] == [True, True, True, False]


def test_a_missing_count_gives_no_verdict() -> None:
    views = _run((0.0, {}), (10.0, {"row_remap_pending": 0}), (20.0, {COUNTER: 1}), (30.0, {}))
    assert [_verdict(v) for v in views] == [None, None, True, None]  # never passed by default, never failed
    assert all(v.health is not None and v.health.healthy for v in views)


# --- through the API ---------------------------------------------------------------------------------------------


def _push(client: TestClient, node: str, gpus: list[dict[str, Any]]) -> None:
    response = client.post(f"/v1/nodes/{node}/samples", json={"timestamp": time.time(), "pool": "p", "gpus": gpus})
    assert response.status_code == 200, response.text


def test_an_increase_puts_the_node_on_the_drain_list_and_the_series(client: TestClient) -> None:
    _push(client, "n", [gpu(0, **{COUNTER: 0}), gpu(1, **{COUNTER: 0})])
    assert client.get("/v1/nodes", params={"drain": "true"}).json()["count"] == 0
    _push(client, "n", [gpu(0, **{COUNTER: 0}), gpu(1, **{COUNTER: 1})])
    (node,) = client.get("/v1/nodes", params={"drain": "true"}).json()["data"]
    (reason,) = node["health"]["reasons"]
    assert (reason["check"], reason["gpu"], reason["drain"]) == (CHECK, 1, True)
    assert reason["meaning"] == CHECKS[CHECK].meaning
    assert node["gpus"][1]["health"][CHECK] is False and node["gpus"][0]["health"][CHECK] is True
    text = scrape(client)
    assert metric_value(text, "mfumon_node_drain", node="n", reason=CHECK) == 1
    assert metric_value(text, "mfumon_gpu_health", node="n", gpu="1", check=CHECK) == 0
    assert metric_value(text, "mfumon_gpu_health", node="n", gpu="0", check=CHECK) == 1
    assert metric_value(text, "mfumon_node_healthy", node="n") == 0
    assert metric_value(text, "mfumon_pool_gpu_faults_total", pool="p") == 1


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(2, 2, id="constant-nonzero"),
        pytest.param(2, 0, id="counter-reset"),
    ],
)
def test_no_increase_passes(client: TestClient, first: int, second: int) -> None:
    _push(client, "n", [gpu(0, **{COUNTER: first})])
    _push(client, "n", [gpu(0, **{COUNTER: second})])
    node = client.get("/v1/nodes/n").json()
    assert node["health"]["healthy"] is True and node["gpus"][0]["health"][CHECK] is True
    text = scrape(client)
    assert metric_value(text, "mfumon_gpu_health", node="n", gpu="0", check=CHECK) == 1
    assert metric_value(text, "mfumon_node_drain", node="n", reason=CHECK) is None


def test_a_missing_count_gives_no_check_and_no_series(client: TestClient) -> None:
    _push(client, "n", [gpu(0)])
    _push(client, "n", [gpu(0, row_remap_pending=0)])
    node = client.get("/v1/nodes/n").json()
    assert CHECK not in node["gpus"][0]["health"] and node["health"]["healthy"] is True
    assert metric_value(scrape(client), "mfumon_gpu_health", node="n", gpu="0", check=CHECK) is None


def test_the_increase_stops_failing_after_the_window(make_client: Callable[..., TestClient]) -> None:
    client = make_client(HEALTH_WINDOW_SECONDS=1.0)
    _push(client, "n", [gpu(0, **{COUNTER: 0})])
    _push(client, "n", [gpu(0, **{COUNTER: 1})])
    assert [r["check"] for r in client.get("/v1/nodes/n").json()["health"]["reasons"]] == [CHECK]
    time.sleep(1.3)  # the window passes with the count flat at 1
    _push(client, "n", [gpu(0, **{COUNTER: 1})])
    assert client.get("/v1/nodes/n").json()["health"]["healthy"] is True
