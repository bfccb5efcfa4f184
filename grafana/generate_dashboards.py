"""Generate the mfu-monitor Grafana dashboards into grafana/dashboards/*.json.

    python grafana/generate_dashboards.py          # rewrite the JSON files
    python grafana/generate_dashboards.py --check  # exit 1 if the committed JSON differs from this script

Queries use the recording rules of deploy/prometheus/rules/ where one exists (replicas collapsed, windows
precomputed), and `max by (...)` over raw aggregator series otherwise, so that two aggregator replicas never
double a value.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _capacity import capacity_queue
from _goodput import gpu_hours
from _health import fleet_health
from _inference import inference
from _infrastructure import nodes_gpus, pools
from _workloads import cluster_overview, job_drilldown

OUTPUT_DIR = Path(__file__).resolve().parent / "dashboards"

DASHBOARDS = {
    "mfumon-capacity.json": capacity_queue,
    "mfumon-cluster-overview.json": cluster_overview,
    "mfumon-job-drilldown.json": job_drilldown,
    "mfumon-inference.json": inference,
    "mfumon-nodes-gpus.json": nodes_gpus,
    "mfumon-pools.json": pools,
    "mfumon-fleet-health.json": fleet_health,
    "mfumon-gpu-hours.json": gpu_hours,
}


def render_all() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render_all().items():
        path = OUTPUT_DIR / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python grafana/generate_dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
