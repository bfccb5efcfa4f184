"""A node's health advanced by its shortcut (every GPU sends what its checks read as last time, nothing grew within
the window: the previous checks are reused) equals the health worked out in full, push after push, whatever the
counters do: grow, reset, appear, vanish, throttle, go down, sit idle; whatever the PCIe link and the NVLink fabric
report, busy or idle (an idle GPU's Gen1 link is no evidence, a busy one's is)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.health import NodeHealth, advance
from mfumon.api.state.views import NodeView, build_node_view, gpu_views, port_views
from mfumon.mfu._mfu import default_peak_table
from tests.utils.factories import gpu, ib_port

RESOLVER = DeviceResolver(default_peak_table())
WINDOW_S = 30.0
COUNTERS = (
    "nvlink_replay_errors_total",
    "pcie_replays_total",
    "remapped_rows_uncorrectable_total",
    "ecc_deferred_total",
)

#: What the link and fabric checks read, and the busy-ness that makes a slow link generation count (None: absent)
LINK_VALUES: tuple[tuple[str, list[Any]], ...] = (
    ("utilization", [None, 0.0, 0.0, 0.9]),
    ("sm_active", [None, 0.0, 0.4]),
    ("pcie_link_gen", [None, 1, 4, 5]),
    ("pcie_link_gen_max", [None, 5, 5]),
    ("pcie_link_width", [None, 8, 16, 16]),
    ("pcie_link_width_max", [None, 16]),
    ("fabric_health_summary", [None, 0, 1, 1, 2, 3]),
    ("fabric_health_mask", [None, 0, 0b10101010, 0b10101001]),
    ("fabric_manager_status", [None, 0, 3, 4]),
)


def view_of(body: dict[str, Any], at: float) -> NodeView:
    sample = NodeSampleCreate.model_validate({**body, "timestamp": at})
    return build_node_view(
        name="n1",
        pool="p",
        last_seen_at=at,
        last_sample_timestamp=at,
        samples_received=1,
        updated_at=at,
        gpus=gpu_views("n1", at, sample.gpus, RESOLVER),
        ib_ports=port_views(sample.ib_ports),
    )


@st.composite
def gpu_state(draw: st.DrawFn, index: int) -> dict[str, Any]:
    body = gpu(index, job_id=draw(st.sampled_from([None, "j1"])), up=draw(st.sampled_from([True, True, True, False])))
    if not body["up"]:
        return {k: body[k] for k in ("uuid", "index", "name", "up")}
    body["compute_processes"] = draw(st.sampled_from([0, 1]))
    body["energy_joules_total"] = float(draw(st.integers(0, 3)) * 1000)
    for name in COUNTERS:
        value = draw(st.sampled_from([None, 0, 0, 1, 2]))
        if value is not None:
            body[name] = value
    for name, values in (
        ("ecc_uncorrected_total", [None, 0, 0, 1]),
        ("last_xid", [None, 0, 13, 79]),
        ("row_remap_pending", [None, 0, 1]),
        ("throttle_reasons", [None, [], ["hw_slowdown"], ["sw_thermal", "hw_slowdown"]]),
        *LINK_VALUES,
    ):
        value = draw(st.sampled_from(values))
        if value is not None:
            body[name] = value
        else:
            body.pop(name, None)  # the factory's utilization and SM activity too: absent, not busy
    return body


@st.composite
def pushes(draw: st.DrawFn) -> list[tuple[float, dict[str, Any]]]:
    """A node's pushes: mostly a repeat of the previous one, sometimes a GPU or port changed."""
    gpus = [draw(gpu_state(k)) for k in range(draw(st.integers(1, 3)))]
    ports = [ib_port("mlx5_0", 1)] if draw(st.booleans()) else None
    at, out = 1000.0, []
    for _ in range(draw(st.integers(2, 12))):
        at += draw(st.sampled_from([5.0, 10.0, 40.0]))  # some gaps outlast the window
        if draw(st.integers(0, 2)) == 0:
            k = draw(st.integers(0, len(gpus) - 1))
            gpus[k] = draw(gpu_state(k))
        elif draw(st.integers(0, 1)) == 0:  # one link or fabric figure, or the busy-ness, changes: nothing else
            k = draw(st.integers(0, len(gpus) - 1))
            name, values = draw(st.sampled_from(LINK_VALUES))
            value = draw(st.sampled_from(values))
            if gpus[k]["up"]:
                gpus[k] = {n: v for n, v in gpus[k].items() if n != name}
                if value is not None:
                    gpus[k][name] = value
        if ports is not None and draw(st.integers(0, 3)) == 0:
            ports = [ib_port("mlx5_0", 1, link_downed_total=draw(st.integers(0, 2)), state="ACTIVE")]
        body: dict[str, Any] = {"gpus": [dict(g) for g in gpus]}
        if ports is not None:
            body["ib_ports"] = ports
        out.append((at, body))
    return out


def outcome(health: NodeHealth | None) -> tuple[Any, ...]:
    assert health is not None
    return (
        health.gpu_checks,
        health.node_checks,
        health.reasons,
        health.grew_at,
        health.idle_energy_joules,
        health.idle_gpu_seconds,
        health.faults,
    )


@settings(max_examples=300, deadline=None)
@given(pushes())
def test_the_shortcut_gives_the_health_worked_out_in_full(sequence: list[tuple[float, dict[str, Any]]]) -> None:
    held_fast = held_full = None
    for at, body in sequence:
        fast = advance(held_fast, view_of(body, at), WINDOW_S)
        # In full: the held view's health without its record of what the checks read, so nothing can be reused.
        if held_full is not None and held_full.health is not None:
            held_full = dataclasses.replace(held_full, health=dataclasses.replace(held_full.health, inputs={}))
        full = advance(held_full, view_of(body, at), WINDOW_S)
        assert outcome(fast.health) == outcome(full.health), body
        held_fast, held_full = fast, full


def test_a_repeated_push_reuses_the_checks_and_a_grown_counter_does_not() -> None:
    """Guards the property above: the shortcut is taken when it may be, and not when a counter grew."""
    body = {"gpus": [gpu(0, nvlink_replay_errors_total=0, throttle_reasons=["hw_slowdown"])]}
    first = advance(None, view_of(body, 1000.0), WINDOW_S)
    again = advance(first, view_of(body, 1010.0), WINDOW_S)
    assert again.health is not None and first.health is not None
    assert again.health.gpu_checks[gpu(0)["uuid"]] is first.health.gpu_checks[gpu(0)["uuid"]]
    grown = advance(again, view_of({"gpus": [{**body["gpus"][0], "nvlink_replay_errors_total": 1}]}, 1020.0), 60)
    assert grown.health is not None and grown.health.gpu_checks[gpu(0)["uuid"]]["nvlink_errors"] is False
    assert grown.health.gpu_checks[gpu(0)["uuid"]]["hw_slowdown"] is False
