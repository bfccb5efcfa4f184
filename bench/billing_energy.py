"""What energy and cost (issue 60) add to the periodic billing and to each push, in one run, as ratios.

Run: ``.venv/bin/python bench/billing_energy.py [--nodes N] [--repeats R]``. A state of ``N`` 8-GPU nodes (the
push of ``bench/aggregator_scale.py`` plus an energy counter; one node in eight idle) taken twice, so every GPU has a
mean power. Then, best of ``--repeats``:

- per billing interval: the GPU-state counts the billing made before (``idle_and_unreported`` + ``busy_unreported``)
  beside what it does now (``state_prices``: the idle and unreported GPUs counted and priced node by node, in place
  of ``idle_and_unreported``; ``busy_unreported``; ``fleet_draw``: every node's power to its jobs and states), in ms;
- per push: ``ClusterState.apply_node`` with and without ``derive_power`` (a node's eight GPUs' power from their
  previous view), in microseconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.aggregator_scale import node_sample
from mfumon.api.pricing import PriceList
from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.api.services.fleet_billing import fleet_draw, state_counts, state_prices
from mfumon.api.state import store
from mfumon.api.state.aggregate import busy_unreported, node_gpu_states, reporting_jobs
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.store import ClusterState, Snapshot
from mfumon.api.state.views import NodeView, build_node_view, gpu_views
from mfumon.mfu._mfu import default_peak_table

PRICES = PriceList(pools={"pool-0": 2.5}, devices={"h100-sxm": 2.2}, kwh=0.12, pue=1.3)


def views(nodes: int, ts: float, resolver: DeviceResolver) -> list[NodeView]:
    out = []
    for n in range(nodes):
        body = node_sample(n, ts)
        for gpu in body["gpus"]:  # type: ignore[attr-defined]
            gpu["energy_joules_total"] = 1e9 + ts * gpu["power_watts"]
            if n % 8 == 7:  # an idle node
                gpu.update(job_id=None, utilization=0.0, sm_active=0.0, tensor_active=0.0, compute_processes=0)
        sample = NodeSampleCreate.model_validate(body)
        gpus = gpu_views(f"n{n}", ts, sample.gpus, resolver)
        out.append(
            build_node_view(
                name=f"n{n}",
                pool=sample.pool,
                last_seen_at=ts,
                last_sample_timestamp=ts,
                samples_received=1,
                updated_at=ts,
                gpus=gpus,
            )
        )
    return out


def idle_and_unreported(snapshot: Snapshot) -> dict[str | None, tuple[int, int]]:
    """The billing's GPU-state count before issue 60 (then ``mfumon.api.state.aggregate``), kept here as the
    baseline: idle and unreported GPUs per pool and the cluster, not priced."""
    reporting = reporting_jobs(snapshot)
    totals: dict[str | None, list[int]] = {None: [0, 0]}
    pools_of = snapshot.pools.of
    for node in snapshot.nodes:
        states = node_gpu_states(node, reporting)
        for key in (None, *pools_of(node)):
            counts = totals.setdefault(key, [0, 0])
            counts[0] += states["idle"]
            counts[1] += states["unreported"]
    return {key: (idle, unreported) for key, (idle, unreported) in totals.items()}


def best_ms(work: object, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=12_500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    resolver = DeviceResolver(default_peak_table())
    state = ClusterState(node_ttl_seconds=1e9, job_ttl_seconds=1e9, pending_job_ttl_seconds=1e9)
    first, second = views(args.nodes, 1000.0, resolver), views(args.nodes, 1010.0, resolver)
    for view in first + second:
        state.apply_node(view)
    snapshot = state.snapshot(1010.0)
    before = best_ms(lambda: (idle_and_unreported(snapshot), busy_unreported(snapshot)), args.repeats)
    assert state_counts(state_prices(snapshot, PRICES)) == idle_and_unreported(snapshot)
    after = best_ms(
        lambda: (state_counts(state_prices(snapshot, PRICES)), busy_unreported(snapshot), fleet_draw(snapshot)),
        args.repeats,
    )
    gpus = args.nodes * 8
    print(
        f"billing at {gpus:,} GPUs: GPU states {before:.1f} ms before; states counted and priced + energy "
        f"{after:.1f} ms now: x{after / before:.2f} the billing's CPU per interval"
    )

    third = views(min(args.nodes, 2000), 1020.0, resolver)
    count = len(third)

    def apply_all() -> None:
        for view in third:
            state.apply_node(view, replaces=state.node(view.name))

    with_power = best_ms(apply_all, 1) * 1e3 / count
    third = views(min(args.nodes, 2000), 1030.0, resolver)
    with mock.patch.object(store, "derive_power", lambda held, view: None):
        without = best_ms(apply_all, 1) * 1e3 / count
    print(
        f"apply_node per 8-GPU push: {without:.1f} us without derive_power, {with_power:.1f} us with "
        f"(x{with_power / without:.2f})"
    )


if __name__ == "__main__":
    main()
