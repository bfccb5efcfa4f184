"""What rendering a node's series costs per push (``mfumon.api.metrics.node.render_node``), and the memory it keeps.

Run: ``.venv/bin/python bench/render_node.py [--nodes N] [--counters all]``. Each node is the bench's 8-GPU push
(``bench/aggregator_scale.py``; with ``--counters all``, with every counter the NVML source reads on Hopper),
rendered after the push before it, three ways side by side in one process:

- ``first push``: no previous lines (a node's first push, or one after its shape changed): every family formatted;
- ``next push``: from the previous push's lines, families whose labels and values did not change reused;
- ``all changed``: the same, with every family's values changed (no family reused).

Per node: microseconds (best of ``--repeats``), their ratio to ``first push``, and the bytes a node's rendered lines
and arguments keep, and the templates' (``sys.getsizeof``; labels and values are the view's own objects, shared).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.aggregator_scale import node_name, node_sample
from mfumon.api.metrics.node import GpuLines, render_node
from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.health import advance
from mfumon.api.state.views import NodeView, build_node_view, gpu_views
from mfumon.mfu._mfu import default_peak_table

#: What the NVML source sends besides the bench's counters on a Hopper node (``--counters all``): link traffic, the
#: error counters and checks, energy and clock-event reasons; errors stay 0 and traffic and energy change.
ALL_COUNTERS = {
    "sm_occupancy": 0.31,
    "dram_active": 0.42,
    "nvlink_crc_flit_errors_total": 0,
    "nvlink_crc_data_errors_total": 0,
    "nvlink_replay_errors_total": 0,
    "nvlink_recovery_errors_total": 0,
    "pcie_replays_total": 0,
    "ecc_uncorrected_total": 0,
    "ecc_corrected_total": 0,
    "remapped_rows_correctable_total": 0,
    "remapped_rows_uncorrectable_total": 0,
    "row_remap_pending": 0,
    "row_remap_failure": 0,
    "last_xid": 0,
    "throttle_reasons": [],
}


def views(
    nodes: int, variant: int, held: list[NodeView] | None, change_all: bool = False, every_counter: bool = False
) -> list[NodeView]:
    resolver = DeviceResolver(default_peak_table())
    out = []
    for n in range(nodes):
        body = node_sample(n, 1e9 + 10 * variant, variant)
        gpus = cast("list[dict[str, Any]]", body["gpus"])
        if every_counter:
            for i, gpu in enumerate(gpus):
                traffic = 1e11 + 1e9 * variant + i
                gpu.update(ALL_COUNTERS, nvlink_tx_bytes_per_second=traffic, nvlink_rx_bytes_per_second=traffic / 2)
                gpu.update(pcie_tx_bytes_per_second=traffic / 10, pcie_rx_bytes_per_second=traffic / 20)
                gpu.update(energy_joules_total=1.2e9 + 5000 * variant + i)
        if change_all:  # the values the bench's push keeps from one push to the next, changed too
            for i, gpu in enumerate(gpus):
                gpu.update(memory_total_bytes=8e10 + variant, max_sm_clock_hz=2e9 + variant, xid_errors_total=variant)
                gpu.update(compute_processes=1 + variant % 2, sm_clock_hz=1.5e9 + variant + i)
        sample = NodeSampleCreate.model_validate_json(json.dumps(body))
        name = node_name(n)
        view = build_node_view(
            name=name,
            pool=sample.pool,
            last_seen_at=sample.timestamp,
            last_sample_timestamp=sample.timestamp,
            samples_received=variant + 1,
            updated_at=sample.timestamp,
            gpus=gpu_views(name, sample.timestamp, sample.gpus, resolver),
        )
        out.append(advance(held[n] if held else None, view, 600.0))
    return out


def best_us(work: Callable[[], object], count: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best / count * 1e6


def kept_bytes(lines: GpuLines, chunk: dict[str, bytes]) -> tuple[int, int, int]:
    """A node's rendered lines and its arguments list (its own); the template's format strings (shared)."""
    template = sum(sys.getsizeof(text) for _, text, _ in lines.template.families)
    return sum(sys.getsizeof(b) for b in chunk.values()), sys.getsizeof(lines.arguments), template


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--counters", choices=("bench", "all"), default="bench", help="the bench's push, or more")
    args = parser.parse_args()
    nodes, repeats, every = args.nodes, args.repeats, args.counters == "all"

    first = views(nodes, 0, None, every_counter=every)
    held = [render_node(v)[1] for v in first]
    same = views(nodes, 1, first, every_counter=every)
    before = views(nodes, 0, None, change_all=True, every_counter=every)
    changed = views(nodes, 1, before, change_all=True, every_counter=every)
    held_changed = [render_node(v)[1] for v in before]

    cold = best_us(lambda: [render_node(v) for v in same], nodes, repeats)
    warm = best_us(lambda: [render_node(v, p) for v, p in zip(same, held, strict=True)], nodes, repeats)
    full = best_us(lambda: [render_node(v, p) for v, p in zip(changed, held_changed, strict=True)], nodes, repeats)
    chunk, lines = render_node(same[0], held[0])
    chunk_bytes, arguments_bytes, template_bytes = kept_bytes(lines, chunk)
    line_count = sum(c.count(b"\n") for c in chunk.values())
    print(f"{nodes} nodes of 8 GPUs, {line_count} lines a node; best of {repeats}")
    print(f"{'render':<14}{'us/node':>9}{'÷ first push':>14}")
    for name, us in (("first push", cold), ("next push", warm), ("all changed", full)):
        print(f"{name:<14}{us:>9.1f}{us / cold:>14.2f}")
    print(f"kept per node: lines {chunk_bytes} bytes, arguments list {arguments_bytes} bytes")
    templates = len({id(lines.template) for lines in held})
    print(f"templates: {templates}, {template_bytes} bytes each, shared by the nodes of their shape")


if __name__ == "__main__":
    main()
