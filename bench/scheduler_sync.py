"""Cost of keeping N scheduler jobs in step: one snapshot sync against N per-job ``PUT /v1/jobs/{id}``, one process.

Run: ``.venv/bin/python bench/scheduler_sync.py [--jobs N] [--repeats R]``. Both sides go through the same app
(TestClient, SQLite in a temporary directory) so only the way of talking differs. Rounds, interleaved:
- ``sync first``: the first snapshot of N new pending jobs (creates them);
- ``sync same``: the same snapshot again (nothing changes: the steady state every 30 s);
- ``sync 10% moved``: a tenth of the jobs started (placement, histogram update);
- ``put each``: N ``PUT /v1/jobs/{id}`` of the same metadata (what an adapter without a snapshot route would send).
Figures are medians, reported as ratios to ``put each``; the machine's load changes absolute times.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from mfumon.api.core.config import Settings
from mfumon.api.main import create_app


def _jobs(n: int, started: int, now: float) -> list[dict[str, Any]]:
    jobs = []
    for i in range(n):
        job: dict[str, Any] = {
            "job_id": f"{i}",
            "status": "pending",
            "gpus_requested": 8,
            "units": [[8, 1]],
            "submitted_at": now - 600,
            "queued_at": now - 600,
            "pool": f"pool-{i % 4}",
            "team": f"team-{i % 16}",
        }
        if i < started:
            job.update(status="running", gpus_allocated=8, placement={f"node-{i}": 8}, started_at=now)
        jobs.append(job)
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"sync first": [], "sync same": [], "sync 10% moved": [], "put each": []}
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            app = create_app(Settings(DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}"))
            with TestClient(app) as client:
                now = time.time()
                for name, jobs in (
                    ("sync first", _jobs(args.jobs, 0, now)),
                    ("sync same", _jobs(args.jobs, 0, now)),
                    ("sync 10% moved", _jobs(args.jobs, args.jobs // 10, now)),
                ):
                    body = {"kind": "slurm", "observed_at": time.time(), "jobs": jobs}
                    start = time.perf_counter()
                    assert client.put("/v1/scheduler/bench", json=body).status_code == 200
                    rows[name].append(time.perf_counter() - start)
                start = time.perf_counter()
                for i in range(args.jobs):
                    body = {"gpus_requested": 8, "pool": f"pool-{i % 4}", "team": f"team-{i % 16}"}
                    assert client.put(f"/v1/jobs/put-{i}", json=body).status_code == 200
                rows["put each"].append(time.perf_counter() - start)
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
    base = statistics.median(rows["put each"])
    print(f"{args.jobs} jobs, median of {args.repeats} (SQLite, TestClient, one process)")
    for name, times in rows.items():
        median = statistics.median(times)
        print(f"  {name:<15} {median * 1000:9.1f} ms   {median / base:6.3f} x put each")


if __name__ == "__main__":
    main()
