"""A push held undigested until the node is read (mfumon.api.state.arrivals) ends where digesting every push ends.

The property: over random runs of pushes (every GPU and port field changing now and then, stale and late pushes
among them, reads at random points), a state that digests only when read shows at every read exactly what a state
that digests every push shows: the node's view, its health and history, and the pool totals. A health check that
whose every value counts but that ``GPU_HISTORY_FIELDS`` leaves out makes a run where only that field changes differ,
so the exhaustive test below finds it. Also: pushes and reads from two threads lose no push.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mfumon.api.schemas.nodes import GpuSample, IbPortSample, NodeSampleCreate
from mfumon.api.state.arrivals import Arrival
from mfumon.api.state.store import ClusterState
from mfumon.api.state.views import NodeView
from mfumon.exporter.samples import COUNTER_FIELDS

T0 = 1_800_000_000.0
_RATIOS = {"utilization", "sm_active", "sm_occupancy", "tensor_active", "dram_active"}
_FLAGS = {"row_remap_pending", "row_remap_failure"}


def _values(field: str) -> list[Any]:
    """A few values of a GPU field, so that runs often repeat a push (the case that waits) and sometimes not."""
    if field in _RATIOS:
        return [None, 0.0, 0.5]
    if field in _FLAGS:
        return [0, 1]
    if field == "last_xid":
        return [None, 13, 79]
    if field == "throttle_reasons":
        return [None, [], ["sw_thermal"], ["hw_slowdown", "sw_power_cap"]]
    if field == "up":
        return [True, False]
    if field == "job_id":
        return [None, "j0", "j1"]
    if field == "shares":
        return [None, "two"]
    if field == "energy_joules_total":
        return [0.0]  # a reset; otherwise it grows by itself, push by push
    return [None, 0, 1, 2]


_GPU_FIELDS = sorted({*COUNTER_FIELDS, "throttle_reasons", "job_id", "up", "shares"})
_PORT_FIELDS = {
    "state": ["ACTIVE", "DOWN"],
    "link_downed_total": [None, 0, 1],
    "symbol_errors_total": [0, 1],
    "receive_errors_total": [0, 3],
    "link_error_recovery_total": [None, 0, 1],
    "transmit_bytes_total": [0, 10**9],
}

_gpu_change = st.tuples(st.sampled_from([0, 1]), st.sampled_from(_GPU_FIELDS)).flatmap(
    lambda c: st.tuples(st.just(c[0]), st.just(c[1]), st.sampled_from(_values(c[1])))
)
_port_change = st.sampled_from(sorted(_PORT_FIELDS)).flatmap(
    lambda f: st.tuples(st.just(f), st.sampled_from(_PORT_FIELDS[f]))
)
_push = st.fixed_dictionaries(
    {
        "dt": st.sampled_from([10.0, 10.0, 10.0, 30.0, 400.0, 700.0, -25.0]),  # -25: a stale (spooled) push
        "gpu": st.lists(_gpu_change, max_size=2),
        "port": st.lists(_port_change, max_size=1),
        "pool": st.sampled_from(["p0", "p0", "p0", "p0", "p1", None]),
        "read": st.booleans(),
    }
)


def _state() -> ClusterState:
    return ClusterState(node_ttl_seconds=1e9, job_ttl_seconds=1e9, pending_job_ttl_seconds=1e9)


def _initial() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    gpus = [  # GPU-0 runs job j0; GPU-1 is idle (no job, no process), so idle time and energy count
        {
            "uuid": f"GPU-{i}",
            "index": i,
            "name": "NVIDIA H100 80GB HBM3",
            "job_id": "j0" if i == 0 else None,
            "utilization": 0.5 if i == 0 else 0.0,
            "compute_processes": 1 if i == 0 else 0,
            "energy_joules_total": 1000.0,
            "nvlink_crc_flit_errors_total": 0,
            "pcie_replays_total": 0,
        }
        for i in range(2)
    ]
    port = {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "link_downed_total": 0, "symbol_errors_total": 0}
    return gpus, port


def _apply(gpus: list[dict[str, Any]], port: dict[str, Any], push: dict[str, Any], dt: float) -> None:
    for gpu in gpus:
        if gpu.get("energy_joules_total") is not None:
            gpu["energy_joules_total"] += 100.0 * max(dt, 0.0)
    for index, field, value in push["gpu"]:
        gpu = gpus[index]
        if field == "shares":
            gpu["shares"] = (
                None
                if value is None
                else [
                    {"job_id": "j0", "share": 0.25, "method": "accounting"},
                    {"job_id": "j2", "share": 0.75, "method": "accounting"},
                ]
            )
            if value is not None:
                gpu["job_id"] = None
        elif field == "job_id" and gpu.get("shares") is not None:
            continue  # a shared GPU's job id must be among its shares: left as it is
        else:
            gpu[field] = value
    for field, value in push["port"]:
        port[field] = value


def _sample(stamp: float, gpus: list[dict[str, Any]], port: dict[str, Any], pool: str | None) -> NodeSampleCreate:
    return NodeSampleCreate(
        timestamp=stamp,
        pool=pool,
        gpus=[GpuSample.model_validate({k: v for k, v in g.items() if v is not None}) for g in gpus],
        ib_ports=[IbPortSample.model_validate({k: v for k, v in port.items() if v is not None})],
    )


def _seen(state: ClusterState) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a reader sees of node n1: its view (health included) and the pool totals."""
    view = state.node("n1")
    assert view is not None
    snapshot = state.snapshot(T0 + 1e6)
    pools = {
        f"{pool} {name}": value
        for pool, t in snapshot.pool_health.items()
        for name, value in (("energy", t.idle_energy_joules), ("seconds", t.idle_gpu_seconds), ("faults", t.gpu_faults))
    }
    return _fields(view), pools


def _fields(view: NodeView) -> dict[str, Any]:
    health = view.health
    assert health is not None
    return {
        "pool": view.pool,
        "last_seen_at": view.last_seen_at,
        "last_sample_timestamp": view.last_sample_timestamp,
        "samples_received": view.samples_received,
        "updated_at": view.updated_at,
        "gpus": [(g.uuid, g.job_id, g.up, g.counters, g.busy, g.shares, g.sample_timestamp) for g in view.gpus],
        "ports": view.ib_ports,
        "shares": view.shares,
        "idle": (view.gpus_idle, view.gpus_down),
        "gpu_checks": health.gpu_checks,
        "node_checks": health.node_checks,
        "reasons": health.reasons,
        "grew_at": health.grew_at,
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_push, min_size=1, max_size=40))
def test_digesting_when_read_shows_what_digesting_every_push_shows(pushes: list[dict[str, Any]]) -> None:
    lazy, eager = _state(), _state()
    gpus, port = _initial()
    stamp = newest = T0
    for k, push in enumerate([{"dt": 0.0, "gpu": [], "port": [], "pool": None, "read": False}, *pushes]):
        _apply(gpus, port, push, push["dt"])
        stamp += push["dt"]
        sample = _sample(stamp, copy.deepcopy(gpus), dict(port), push["pool"])
        received = max(stamp, newest) + 0.5  # arrival time: never going back
        newest = max(newest, stamp)
        for state in (lazy, eager):
            state.take_push("n1", Arrival(sample, min(stamp, received), received, received))
        eager.node("n1")  # digested at once, as every push was before arrivals
        if push["read"] or k == len(pushes):
            (view, pools), (expected_view, expected_pools) = _seen(lazy), _seen(eager)
            assert view == expected_view, f"after push {k}"
            assert pools == pytest.approx(expected_pools), f"after push {k}"  # sums in another order


def _run(changes: list[tuple[str, int, str, Any]], *, read_every: bool, every: float = 10.0) -> dict[str, Any]:
    """Pushes of node n1, each after one change (``gpu``/``port``, GPU index, field, value), ``every`` seconds; what
    is read at the end, digesting every push (``read_every``) or none until then."""
    state = _state()
    gpus, port = _initial()
    for k, (where, index, field, value) in enumerate([("port", 0, "state", "ACTIVE"), *changes]):
        push = {
            "gpu": [(index, field, value)] if where == "gpu" else [],
            "port": [(field, value)] if where == "port" else [],
        }
        _apply(gpus, port, push, every)
        stamp = T0 + every * k
        sample = _sample(stamp, copy.deepcopy(gpus), dict(port), "p0")  # a pool: its fault and idle totals count
        state.take_push("n1", Arrival(sample, stamp, stamp, stamp))
        if read_every:
            state.node("n1")
    return {"view": _seen(state)[0], "pools": _seen(state)[1]}


@pytest.mark.parametrize(
    ("where", "field"), [("gpu", f) for f in _GPU_FIELDS] + [("port", f) for f in sorted(_PORT_FIELDS)]
)
def test_every_field_changed_twice_between_reads_ends_as_if_every_push_was_digested(where: str, field: str) -> None:
    """Exhaustive where the property above samples: a field set to one value and then another (or back) before the
    node is read, then a push that changes nothing. A field whose every value counts that ``GPU_HISTORY_FIELDS`` or
    ``PORT_HISTORY_FIELDS`` leaves out fails here, named."""
    values = _values(field) if where == "gpu" else _PORT_FIELDS[field]
    for index in (0, 1) if where == "gpu" else (0,):  # the busy GPU and the idle one
        for first in values:
            for second in values:
                changes = [(where, index, field, first), (where, index, field, second), (where, index, field, second)]
                assert _run(changes, read_every=False) == _run(changes, read_every=True), (index, first, second)


def test_idle_time_across_pushes_further_apart_than_the_idle_gap_counts_as_digesting_every_push_counts() -> None:
    steady = [("gpu", 1, "utilization", 0.0)] * 4
    for every in (400.0, 700.0):  # each gap within MAX_IDLE_GAP_S, their sum beyond it; each gap beyond it
        lazy, eager = _run(steady, read_every=False, every=every), _run(steady, read_every=True, every=every)
        assert lazy == eager
        assert lazy["pools"]["p0 seconds"] == (1600.0 if every == 400.0 else 0.0)


def test_an_energy_counter_reset_between_reads_counts_as_digesting_every_push_counts() -> None:
    # The idle GPU's counter goes back to 0 (a driver reload), then grows again by itself push by push.
    changes = [("gpu", 1, "utilization", 0.0), ("gpu", 1, "energy_joules_total", 0.0)] + [
        ("gpu", 1, "utilization", 0.0)
    ] * 3
    lazy, eager = _run(changes, read_every=False), _run(changes, read_every=True)
    assert lazy == eager
    assert lazy["pools"]["p0 energy"] == 1000.0 + 3 * 1000.0  # 100 W for 10 s, before the reset and after it


def test_pushes_and_reads_from_two_threads_lose_no_push() -> None:
    state = _state()
    gpus, port = _initial()
    nodes, rounds = 20, 150
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            state.snapshot(T0 + 1e6)
            state.node("n3")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for r in range(rounds):
            if r % 50 == 25:  # now and then a push that must be digested at once
                gpus[0]["pcie_replays_total"] += 1
            sample = _sample(T0 + r, gpus, port, None)
            for n in range(nodes):
                state.take_push(f"n{n}", Arrival(sample, T0 + r, T0 + r, T0 + r))
    finally:
        done.set()
        reader.join()
    views = state.snapshot(T0 + 1e6).nodes
    assert len(views) == nodes
    assert {v.samples_received for v in views} == {rounds}
    assert {v.last_sample_timestamp for v in views} == {T0 + rounds - 1}
    assert all(v.health is not None and v.health.grew_at for v in views)  # the last growth was seen


def test_a_push_that_changes_nothing_the_history_reads_waits_and_one_that_does_is_digested_at_once() -> None:
    state = _state()
    gpus, port = _initial()
    state.take_push("n1", Arrival(_sample(T0, gpus, port, None), T0, T0, T0))  # a node's first: digested
    assert state._arrivals == {}
    gpus[0]["utilization"] = 0.9  # a gauge: waits
    state.take_push("n1", Arrival(_sample(T0 + 10, gpus, port, None), T0 + 10, T0 + 10, T0 + 10))
    assert set(state._arrivals) == {"n1"}
    gpus[1]["nvlink_crc_flit_errors_total"] = 1  # an error counter grew: this and the one before, digested
    state.take_push("n1", Arrival(_sample(T0 + 20, gpus, port, None), T0 + 20, T0 + 20, T0 + 20))
    assert state._arrivals == {}
    held = state.node("n1")
    assert held is not None and held.samples_received == 3
    assert held.health is not None and held.health.grew_at == {("GPU-1", "nvlink_crc_flit_errors_total"): T0 + 20}
