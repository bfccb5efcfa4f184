"""End to end on CPU: two gloo ranks with JobReporter, a live aggregator, a profile asked of every rank.

The request goes through the answer to rank 0's report, to rank 1 through the process-group store (a file store
here), each rank profiles three steps with torch.profiler and posts its own summary; the traces stay on disk.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer
from tests.exporter.job.profile._gloo_worker import JOB_ID

pytest.importorskip("torch")
ROOT = Path(__file__).parents[4]


def _until(what: str, check: object, timeout_seconds: float = 90.0) -> object:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if value := check():  # type: ignore[operator]
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_gloo_ranks_profile_on_request(live_server: LiveServer, tmp_path: Path) -> None:
    traces, stop = tmp_path / "traces", tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORLD_SIZE": "2"}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.exporter.job.profile._gloo_worker",
                str(rank),
                live_server.url,
                str(tmp_path / "rendezvous"),
                str(traces),
                str(stop),
            ],
            cwd=ROOT,
            env=env,
        )
        for rank in (0, 1)
    ]
    try:
        with httpx.Client(base_url=live_server.url, timeout=10) as client:
            _until("the job to run", lambda: client.get(f"/v1/jobs/{JOB_ID}").json().get("status") == "running")
            asked = client.post(f"/v1/jobs/{JOB_ID}/profile", json={"steps": 3, "ranks": "all"})
            assert asked.status_code == 202, asked.text

            def both_ranks() -> dict | None:
                profile = client.get(f"/v1/jobs/{JOB_ID}/profiles").json()["data"][0]
                return profile if profile["ranks_reported"] == [0, 1] else None

            profile = _until("both ranks' summaries", both_ranks)
            metrics = client.get("/metrics").text  # while the job runs: an ended job's series leave
            stop.touch()
            assert [w.wait(timeout=60) for w in workers] == [0, 0]
    finally:
        stop.touch()
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    assert isinstance(profile, dict) and profile["status"] == "done"
    for summary in profile["summaries"]:
        assert [s["step"] for s in summary["steps"]] == [1, 2, 3]  # after one warm-up step
        (allreduce,) = summary["collectives"]
        assert allreduce["collective"] == "allreduce" and allreduce["count"] == 3  # one per profiled step
        assert 0 < summary["exposed_comm_seconds"] <= summary["comm_seconds"] <= summary["span_seconds"]
        kept = Path(summary["trace_path"])
        assert kept.parent == traces and f"rank{summary['rank']}" in kept.name
        with gzip.open(kept, "rt") as handle:
            assert "gloo:all_reduce" in json.dumps(json.load(handle)["traceEvents"][:100000])
    assert f'mfumon_job_profile_exposed_comm_ratio{{job_id="{JOB_ID}",kind="training",group="other"}}' in metrics
