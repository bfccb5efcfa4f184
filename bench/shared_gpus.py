"""What per-job shares of shared GPUs (issue 35) cost on the push path: validate, build the views, render the lines.

Run: ``.venv/bin/python bench/shared_gpus.py [--nodes N] [--repeats R]``. For the bench's 8-GPU push
(``bench/aggregator_scale.py``) without shares (every exporter that shares nothing, and every exporter before
issue 35), and the same push with 2 of its 8 GPUs shared by two jobs: microseconds per node (best of ``--repeats``)
for ``NodeSampleCreate.model_validate_json``, ``gpu_views`` + ``build_node_view``, and ``render_node``. Run it on the
branch and on its base (a checkout without shares runs only the plain push) to compare.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.aggregator_scale import node_sample
from bench.render_node import best_us
from mfumon.api.metrics.node import render_node
from mfumon.api.schemas.nodes import GpuSample, NodeSampleCreate
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.views import NodeView, build_node_view, gpu_views
from mfumon.mfu._mfu import default_peak_table


def shared(body: dict[str, object]) -> dict[str, object]:
    """The push with GPUs 0 and 1 time-sliced by two jobs each (a 0.7 / 0.3 split)."""
    gpus = [dict(g) for g in body["gpus"]]  # type: ignore[attr-defined]
    for gpu in gpus[:2]:
        gpu["shares"] = [
            {"job_id": gpu["job_id"], "share": 0.7, "method": "process_utilization"},
            {"job_id": "notebook-1", "share": 0.3, "method": "process_utilization"},
        ]
    return {**body, "gpus": gpus}


def measure(bodies: list[bytes], repeats: int) -> dict[str, float]:
    resolver = DeviceResolver(default_peak_table())
    n = len(bodies)
    samples = [NodeSampleCreate.model_validate_json(b) for b in bodies]

    def build() -> list[NodeView]:
        return [
            build_node_view(
                name=f"n{i}",
                pool=s.pool,
                last_seen_at=s.timestamp,
                last_sample_timestamp=s.timestamp,
                samples_received=1,
                updated_at=s.timestamp,
                gpus=gpu_views(f"n{i}", s.timestamp, s.gpus, resolver),
            )
            for i, s in enumerate(samples)
        ]

    views = build()
    return {
        "validate_us": round(best_us(lambda: [NodeSampleCreate.model_validate_json(b) for b in bodies], n, repeats), 2),
        "views_us": round(best_us(build, n, repeats), 2),
        "render_us": round(best_us(lambda: [render_node(v) for v in views], n, repeats), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    plain = [node_sample(n, 1.8e9) for n in range(args.nodes)]
    out: dict[str, object] = {
        "nodes": args.nodes,
        "gpus_per_node": 8,
        "plain": measure([json.dumps(b).encode() for b in plain], args.repeats),
    }
    if "shares" in GpuSample.model_fields:  # this checkout has shares
        out["two_shared"] = measure([json.dumps(shared(b)).encode() for b in plain], args.repeats)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
