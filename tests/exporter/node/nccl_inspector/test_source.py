"""A whole read of a dump directory per job: pids joined through the node's attribution, counters, bounds."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.nccl_inspector.source import InspectorSource
from tests.exporter.node.nccl_inspector.lines import FIXTURES, fixture_lines, render


def _write(path: Path, lines: list[str], mode: str = "w") -> None:
    with open(path, mode) as handle:
        handle.write("".join(line + "\n" for line in lines))


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """A 2.30 process (pid 4242, job "train-1") and a 2.28 process (pid 1639453, no job) in one directory."""
    _write(tmp_path / "nvl72004-T01-pid4242.log", fixture_lines("constructed-2.30.jsonl"))
    _write(tmp_path / "example-hostname-pid1639453.log", fixture_lines("constructed-2.28-gaps.jsonl"))
    return tmp_path


def _source(directory: Path, jobs: dict[int, str], **kwargs: object) -> InspectorSource:
    return InspectorSource(directory, job_of_pid=jobs.get, first_read="all", **kwargs)  # type: ignore[arg-type]


def test_records_are_joined_to_jobs_per_communicator_and_op(dump: Path) -> None:
    batch = _source(dump, {4242: "train-1"}).collect(time.time())
    jobs = batch.jobs()
    assert set(jobs) == {"train-1", None}
    assert sorted(jobs["train-1"]) == ["0x3c0ffee1234567", "DP Group 0"]
    assert sorted(jobs["train-1"]["DP Group 0"]) == ["AllReduce", "Recv", "Send"]
    allreduce = jobs["train-1"]["DP Group 0"]["AllReduce"]
    assert (allreduce.count, allreduce.gpu_seconds, allreduce.pids) == (2, pytest.approx(0.019), (4242,))
    unknown = jobs[None]["0x7f8c496ae9f661"]["AllReduce"]
    assert (unknown.count, unknown.lost) == (5, 9)
    counters = batch.counters
    assert (counters.files_seen, counters.records, counters.lines, counters.lines_skipped) == (2, 11, 11, 0)
    assert (counters.unknown_pids, counters.lost, counters.rows_dropped) == (1, 9, 0)


def test_only_new_lines_count_in_the_next_cycle(dump: Path) -> None:
    source = _source(dump, {4242: "train-1"})
    assert source.collect(1000.0).interval_seconds is None
    _write(
        dump / "nvl72004-T01-pid4242.log",
        [
            render(
                pid=4242,
                host="nvl72004-T01",
                comm_id="0x5a1c93e0d7b214",
                comm_name="DP Group 0",
                rank=1,
                n_ranks=4,
                sn=14,
            )
        ],
        mode="a",
    )
    batch = source.collect(1010.0)
    assert batch.interval_seconds == 10.0
    (row,) = batch.rows
    assert (row.job_id, row.comm_key, row.op, row.count, row.lost) == ("train-1", "DP Group 0", "AllReduce", 1, 2)
    assert batch.counters.records == 1


def test_a_half_written_line_is_read_once_complete_and_never_counted_as_skipped(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid7.log"
    line = render(pid=7, sn=1)
    path.write_text(line[:60])
    source = _source(tmp_path, {7: "j"})
    assert source.collect(time.time()).counters.records == 0
    with open(path, "a") as handle:
        handle.write(line[60:] + "\n")
    batch = source.collect(time.time())
    assert batch.counters.records == 1 and batch.counters.lines_skipped == 0


def test_broken_lines_are_counted_by_reason(tmp_path: Path) -> None:
    good = render(pid=7, sn=1)
    _write(
        tmp_path / "node-a-pid7.log",
        [good[:80] + good, '{"dump_stats":{}}', good.replace('"rank":0', '"rank":"x"'), good],
    )
    counters = _source(tmp_path, {7: "j"}).collect(time.time()).counters
    assert (counters.skipped_broken, counters.skipped_shape, counters.skipped_field, counters.records) == (1, 1, 1, 1)
    assert counters.lines_skipped == 3


def test_a_truncated_file_starts_its_numbers_over(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid7.log"
    _write(path, [render(pid=7, sn=sn) for sn in (100, 101)])
    source = _source(tmp_path, {7: "j"})
    source.collect(time.time())
    _write(path, [render(pid=7, sn=0)])  # a new process with the same pid, or the old file rewritten
    batch = source.collect(time.time())
    assert batch.counters.truncations == 1 and batch.counters.lost == 0 and batch.counters.late == 0


def test_a_rotated_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid7.log"
    _write(path, [render(pid=7, sn=1)])
    source = _source(tmp_path, {7: "j"})
    source.collect(time.time())
    _write(tmp_path / "new.tmp", [render(pid=7, sn=sn) for sn in (1, 2, 3)])
    os.replace(tmp_path / "new.tmp", path)
    batch = source.collect(time.time())
    assert batch.counters.replacements == 1 and batch.counters.records == 3 and batch.counters.duplicates == 0


def test_the_records_pid_wins_over_the_file_name(tmp_path: Path) -> None:
    _write(tmp_path / "node-a-pid7.log", [render(pid=8, sn=1)])
    batch = _source(tmp_path, {7: "by-name", 8: "by-record"}).collect(time.time())
    assert [r.job_id for r in batch.rows] == ["by-record"] and batch.counters.pid_mismatches == 1


def test_an_attribution_that_fails_leaves_the_rows_unattributed(tmp_path: Path) -> None:
    _write(tmp_path / "node-a-pid7.log", [render(pid=7, sn=1)])

    def broken(pid: int) -> str | None:
        raise PermissionError("/proc/7/environ")

    batch = InspectorSource(tmp_path, job_of_pid=broken, first_read="all").collect(time.time())
    assert [r.job_id for r in batch.rows] == [None] and batch.counters.unknown_pids == 1


def test_pids_join_through_the_node_attribution(tmp_path: Path, proc_root: Callable[..., Path]) -> None:
    proc_root(4242, {"SLURM_JOB_ID": "81234", "SLURM_ARRAY_JOB_ID": "81200", "SLURM_ARRAY_TASK_ID": "34"})
    root = proc_root(9, {"MFUMON_JOB_ID": "explicit"})
    _write(tmp_path / "nvl72004-T01-pid4242.log", fixture_lines("constructed-2.30.jsonl"))
    _write(tmp_path / "node-a-pid9.log", [render(pid=9, sn=1)])
    _write(tmp_path / "node-a-pid31337.log", [render(pid=31337, sn=1)])  # no such process here
    resolver = JobResolver(root)
    batch = InspectorSource(tmp_path, job_of_pid=resolver.process_job, first_read="all").collect(time.time())
    assert set(batch.jobs()) == {"81200_34", "explicit", None}
    assert batch.counters.unknown_pids == 1


def test_rows_are_bounded_and_the_busiest_kept(tmp_path: Path) -> None:
    lines = [render(pid=7, comm_id=f"0x{i:x}", us=10 * (i + 1), sn=1) for i in range(10)]
    _write(tmp_path / "node-a-pid7.log", lines)
    batch = _source(tmp_path, {7: "j"}, max_rows=3).collect(time.time())
    assert len(batch.rows) == 3 and batch.counters.rows_dropped == 7
    assert sorted(r.comm_key for r in batch.rows) == ["0x7", "0x8", "0x9"]


def test_textfiles_join_through_their_gpu_else_their_slurm_label(tmp_path: Path) -> None:
    for case in ("readme-2.30", "blog-2.30"):
        (source,) = (FIXTURES / "prom" / case).glob("*.prom")
        shutil.copy(source, tmp_path / source.name)
    gpus = {"GPU-6b1f0d3e-2a4c-4e8f-9b7d-1c2e3f4a5b6c": "on-gpu"}
    batch = InspectorSource(tmp_path, job_of_pid=lambda pid: None, job_of_gpu=gpus.get).collect(time.time())
    jobs = sorted((row.job_id, row.sample.op) for row in batch.textfiles)
    assert jobs == [("1670760", "ReduceScatter"), ("1670760", "Send"), ("on-gpu", "AllReduce"), ("on-gpu", "Send")]
    assert batch.counters.textfiles_seen == 2 and batch.rows == ()


def test_a_stale_textfile_is_marked(tmp_path: Path) -> None:
    (source,) = (FIXTURES / "prom" / "readme-2.30").glob("*.prom")
    path = Path(shutil.copy(source, tmp_path / source.name))
    now = time.time()
    os.utime(path, (now - 300, now - 300))
    batch = InspectorSource(tmp_path, job_of_pid=lambda pid: None, stale_after_seconds=90).collect(now)
    assert batch.counters.textfiles_stale == 1 and all(row.stale for row in batch.textfiles)


def test_the_batch_as_json(dump: Path) -> None:
    out = _source(dump, {4242: "train-1"}).collect(1760671910.0).to_json()
    json.dumps(out)  # serialisable as it is
    assert [job["job_id"] for job in out["jobs"]] == ["train-1", None]
    comms = {c["comm"]: c for c in out["jobs"][0]["communicators"]}
    send = next(op for op in comms["DP Group 0"]["ops"] if op["op"] == "Send")
    assert (send["kind"], send["count"], send["busbw_gbs"]) == ("p2p", 1, pytest.approx(536870912 / 1e9 / 0.001155))
    assert out["counters"]["unknown_pids"] == 1 and out["counters"]["lines_skipped"] == 0


def test_an_empty_or_missing_directory_gives_an_empty_batch(tmp_path: Path) -> None:
    batch = InspectorSource(tmp_path / "missing", job_of_pid=lambda pid: None).collect(time.time())
    assert batch.rows == () and batch.textfiles == () and batch.counters.files_seen == 0
