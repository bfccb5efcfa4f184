"""``squeue --json`` of real Slurm 22.05 and 24.11 (captured, see fixtures/slurm/README.md) into snapshots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mfumon.exporter.scheduler.slurm import (
    array_tasks,
    base_state,
    exit_code,
    expand_hostlist,
    gpus_in_detail,
    gpus_in_tres,
    parse_squeue,
)

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"


def _load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "observed_at"), [("squeue-22.05-queue.json", 1796066143.0), ("squeue-24.11-queue.json", 1796067490.0)]
)
def test_same_queue_reads_the_same_in_both_versions(name: str, observed_at: float) -> None:
    jobs = {j.job_id: j for j in parse_squeue(_load(name), observed_at).jobs}
    big = jobs["1"]
    assert (big.status, big.gpus_requested, big.units, big.placement) == ("running", 4, [(4, 1)], {"node1": 4})
    assert (big.pool, big.team, big.name) == ("train", "foundation", "big4")
    assert jobs["2"].placement == {"node1": 2} and jobs["3"].units is None  # --gpus may spread
    pend = jobs["4"]
    assert (pend.status, pend.gpus_requested, pend.pending_reason) == ("pending", 8, "Resources")
    assert pend.queued_at is not None and pend.started_at is None
    assert (jobs["5"].gpus_requested, jobs["5"].units) == (2, [(1, 2)])  # --gpus-per-task=1 x 2 tasks
    assert [f"6_{t}" in jobs for t in range(4)] == [True] * 4  # a pending array: one job per task
    assert (jobs["7"].gpus_requested, "8" in jobs) == (sum(u[0] * u[1] for u in jobs["7"].units or []), False)
    held = next(j for j in jobs.values() if j.pending_reason == "JobHeldUser")
    assert held.queued_at is None  # held: pending but not queued
    assert all(j.job_id != "11" and j.job_id != "16" for j in jobs.values())  # CPU-only jobs are left out


def test_requeued_job_keeps_its_id_with_a_restart() -> None:
    jobs = {j.job_id: j for j in parse_squeue(_load("squeue-24.11-requeued.json"), 1796067500.0).jobs}
    requeued = jobs["2"]
    assert (requeued.status, requeued.restarts, requeued.pending_reason) == ("pending", 1, "BeginTime")
    assert requeued.queued_at is None  # waiting for its BeginTime, not for GPUs yet


def test_begin_time_in_the_future_is_not_queued() -> None:
    jobs = {j.job_id: j for j in parse_squeue(_load("squeue-24.11-queue.json"), 1796067490.0).jobs}
    assert (jobs["10"].pending_reason, jobs["10"].queued_at) == ("BeginTime", None)


def test_data_parser_differences() -> None:
    assert gpus_in_tres("gres:gpu:4") == gpus_in_tres("gres/gpu:h100:4") == gpus_in_tres("gres/gpu=4") == 4
    assert gpus_in_tres("gres/gpu:a100:2,gres/gpu:h100:1") == 3 and gpus_in_tres("gres/shard:2") == 0
    assert gpus_in_detail("gpu:h100:4(IDX:0-3)") == 4 and gpus_in_detail("gpu(IDX:0,2,5-6)") == 4
    assert base_state("RUNNING") == base_state(["RUNNING"]) == "RUNNING"
    assert base_state(["PENDING", "REQUEUED"]) == "PENDING"
    assert exit_code(768) == 3 and exit_code(15) == 143  # 22.05: raw wait status
    assert exit_code({"set": True, "infinite": False, "number": 256}) == 1  # 23.02
    number = {"set": True, "infinite": False, "number": 2}
    assert exit_code({"status": ["EXITED"], "return_code": number, "signal": {"id": {"set": False}}}) == 2
    assert exit_code({"status": ["SIGNALED"], "return_code": number, "signal": {"id": {**number, "number": 9}}}) == 137
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert array_tasks("0-3,7") == [0, 1, 2, 3, 7] and array_tasks("0-10:5%2") == [0, 5, 10]
    assert array_tasks("x") is None


def test_large_pending_array_is_bounded() -> None:
    record = {
        "job_id": 50,
        "array_job_id": 50,
        "array_task_string": "0-99999",
        "job_state": "PENDING",
        "state_reason": "Priority",
        "eligible_time": 10,
        "submit_time": 10,
        "tres_per_node": "gres:gpu:1",
        "node_count": 1,
        "partition": "p",
        "account": "a",
    }
    jobs = parse_squeue({"jobs": [record]}, 100.0).jobs
    assert len(jobs) == 1001 and sum(j.gpus_requested for j in jobs) == 100_000
    assert jobs[-1].job_id == "50_[1000-99999]" and jobs[-1].units == [(1, 99_000)]


def test_multi_node_running_job_placement() -> None:
    record = {
        "job_id": 9,
        "job_state": ["RUNNING"],
        "tres_per_node": "gres/gpu:8",
        "node_count": {"set": True, "infinite": False, "number": 2},
        "nodes": "gpu[07-08]",
        "gres_detail": ["gpu:h100:8(IDX:0-7)", "gpu:h100:8(IDX:0-7)"],
        "start_time": {"set": True, "infinite": False, "number": 50},
        "partition": "train,debug",
    }
    (job,) = parse_squeue({"jobs": [record]}, 100.0).jobs
    assert (job.gpus_requested, job.units, job.placement) == (16, [(8, 2)], {"gpu07": 8, "gpu08": 8})
    assert (job.pool, job.started_at, job.team) == ("train", 50.0, None)
