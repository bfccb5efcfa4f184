"""``mfumon scheduler --source slurm`` against a real Slurm: real sbatch jobs that run, pend, requeue and fail."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LiveServer, start_server
from tests.exporter.scheduler.slurm_cluster import SlurmCluster, slurm_cluster
from tests.utils.factories import node_sample


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    with slurm_cluster() as cluster:
        yield cluster


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with start_server(tmp_path) as live:
        yield live


def _sync(slurm: SlurmCluster, server: LiveServer) -> None:
    cmd = [sys.executable, "-m", "mfumon", "scheduler", "--source", "slurm", "--url", server.url, "--once"]
    done = subprocess.run(cmd, env=slurm.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _wait_for(check: Callable[[], bool], what: str, slurm: SlurmCluster, timeout_seconds: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"Slurm never got to: {what}\n{slurm.run('squeue', check=False)}\n{slurm.log()}")
        time.sleep(0.5)


def _states(slurm: SlurmCluster) -> dict[str, tuple[str, str]]:
    out = slurm.run("squeue", "-h", "-t", "all", "-o", "%i|%T|%r")
    return {i: (t, r) for i, t, r in (line.split("|") for line in out.splitlines())}


def _job(server: LiveServer, job_id: str) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/v1/jobs/{job_id}", params={"history": 0})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _metrics(server: LiveServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{server.url}/metrics").text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_real_slurm_queue_is_mirrored(slurm: SlurmCluster, server: LiveServer) -> None:
    sleep = "--wrap=sleep 600"
    big = slurm.sbatch("-A", "foundation", "--gres=gpu:h100:4", "-J", "big", sleep)
    mid = slurm.sbatch("-A", "research", "--gres=gpu:3", "-J", "mid", "--requeue", sleep)
    waits = slurm.sbatch("-A", "research", "--gres=gpu:2", "-J", "waits", sleep)  # 1 GPU left: pends
    held = slurm.sbatch("-A", "research", "--gres=gpu:1", "--hold", "-J", "held", sleep)
    array = slurm.sbatch("-A", "product", "--gres=gpu:1", "--array=0-1", "-J", "arr", sleep)
    nogpu = slurm.sbatch("-A", "product", "-J", "cpu-only", sleep)
    _wait_for(lambda: _states(slurm).get(waits) == ("PENDING", "Resources"), "a job pending on Resources", slurm)
    _wait_for(lambda: _states(slurm).get(mid, ("",))[0] == "RUNNING", "the 3-GPU job running", slurm)

    # The node's exporter: 8 GPUs in pool "train" (pools are those of the nodes exporters report).
    sample = node_sample(8, pool="train")
    assert httpx.post(f"{server.url}/v1/nodes/{slurm.node}/samples", json=sample).status_code == 200
    _sync(slurm, server)
    first = {j: _job(server, j) for j in (big, mid, waits, held)}
    assert (first[big]["status"], first[big]["source"], first[big]["team"]) == ("running", "slurm", "foundation")
    assert first[big]["gpus_requested"] == 4 and first[big]["placement"] == {slurm.node: 4}
    assert first[big]["pool"] == "train" and first[big]["started_at"] is not None
    assert (first[waits]["status"], first[waits]["pending_reason"]) == ("pending", "Resources")
    assert first[waits]["queued_at"] is not None and first[waits]["gpus_requested"] == 2
    assert (first[held]["status"], first[held]["queued_at"]) == ("pending", None)  # held: pending, not queued
    one_of_array = _job(server, f"{array}_0")  # array tasks keep their squeue id from pending to running
    assert one_of_array["gpus_requested"] == 1 and one_of_array["team"] == "product"
    assert httpx.get(f"{server.url}/v1/jobs/{nogpu}").status_code == 404  # not a GPU job
    metrics = _metrics(server)
    assert metrics[("mfumon_job_queue_wait_seconds", (("job_id", waits), ("kind", "training")))] >= 0
    assert ("mfumon_job_queue_wait_seconds", (("job_id", held), ("kind", "training"))) not in metrics
    # train: 4 + 3 allocated (+ array tasks that started) of 4 + 3 + 2 + 2 x 1 requested; held not counted.
    started = sum(_job(server, f"{array}_{t}")["status"] == "running" for t in (0, 1))
    satisfaction = metrics[("mfumon_pool_resource_satisfaction_ratio", (("pool", "train"),))]
    assert satisfaction == pytest.approx((7 + started) / 11)
    assert metrics[("mfumon_scheduler_jobs", (("source", "slurm"), ("status", "held")))] == 1

    # The 4-GPU job ends: the pending one starts, and its wait joins the histogram.
    slurm.run("scancel", big)
    _wait_for(lambda: _states(slurm).get(waits, ("",))[0] == "RUNNING", "the waiting job started", slurm)
    _sync(slurm, server)
    assert _job(server, big)["status"] == "ended"
    assert _job(server, big)["end_state"] in ("CANCELLED", None)
    assert _job(server, waits)["status"] == "running"
    count = ("mfumon_started_job_queue_wait_seconds_count", (("pool", "train"), ("team", "research")))
    assert _metrics(server)[count] >= 1

    # A requeue is a restart of the same job id, not a new job.
    slurm.run("scontrol", "requeue", mid)
    _wait_for(lambda: _states(slurm).get(mid, ("",))[0] == "PENDING", "the requeued job pending", slurm)
    _sync(slurm, server)
    requeued = _job(server, mid)
    assert (requeued["status"], requeued["restarts"], requeued["started_at"]) == ("pending", 1, None)

    # A job that fails: seen while it runs, then ended with Slurm's state and exit code.
    failing = slurm.sbatch("-A", "research", "--gres=gpu:1", "-J", "fails", "--wrap=sleep 3; exit 3")
    _wait_for(lambda: _states(slurm).get(failing, ("",))[0] == "RUNNING", "the failing job running", slurm)
    _sync(slurm, server)
    assert _job(server, failing)["status"] == "running"
    _wait_for(lambda: _states(slurm).get(failing, ("",))[0] == "FAILED", "the failing job failed", slurm)
    _sync(slurm, server)
    failed = _job(server, failing)
    assert (failed["status"], failed["end_state"], failed["exit_code"]) == ("ended", "FAILED", 3)
