"""Job attribution: the environment-variable precedence and the HPC job-mapping directory format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mfumon.exporter.node.attribution import GpuProcess, JobResolver, job_id_from_environ, read_environ
from mfumon.exporter.samples import sanitize_id


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MFUMON_JOB_ID": "mine", "SLURM_JOB_ID": "123"}, "mine"),
        ({"SLURM_JOB_ID": "123", "PBS_JOBID": "9.pbs"}, "123"),
        # an array task (environment seen on Slurm 22.05: SLURM_JOB_ID is the task's own unique id)
        ({"SLURM_JOB_ID": "2", "SLURM_ARRAY_JOB_ID": "1", "SLURM_ARRAY_TASK_ID": "0"}, "1_0"),
        ({"PBS_JOBID": "9.pbs-server", "LSB_JOBID": "55"}, "9.pbs-server"),
        ({"LSB_JOBID": "55", "LSB_JOBINDEX": "0"}, "55"),
        ({"LSB_JOBID": "55", "LSB_JOBINDEX": "3"}, "55_3"),
        ({"FLUX_JOB_ID": "f2Fxwv4G5", "JOB_ID": "1", "SGE_ROOT": "/opt/sge"}, "f2Fxwv4G5"),
        ({"JOB_ID": "8812", "SGE_ROOT": "/opt/sge"}, "8812"),
        ({"JOB_ID": "8812"}, None),  # a bare JOB_ID is too common a name to trust
        ({"SLURM_JOB_ID": ""}, None),
        ({"PATH": "/usr/bin"}, None),
    ],
)
def test_environment_precedence(env: dict[str, str], expected: str | None) -> None:
    assert job_id_from_environ(env) == expected


def test_sanitize_id_keeps_scheduler_ids_and_fixes_the_rest() -> None:
    assert sanitize_id("4242") == "4242"
    assert sanitize_id("1234.pbs01.cluster") == "1234.pbs01.cluster"
    assert sanitize_id(" 77[3] ") == "77_3_"
    assert sanitize_id("-.") is None
    assert len(sanitize_id("x" * 300) or "") == 128


def test_read_environ_parses_nul_separated_and_tolerates_missing(proc_root: Callable[..., Path]) -> None:
    root = proc_root(10, {"A": "1", "B": "x=y"})
    assert read_environ(root, 10) == {"A": "1", "B": "x=y"}
    assert read_environ(root, 11) is None


def test_mapping_dir_by_index_and_mig_instance(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("1001\n")
    (tmp_path / "2.1").write_text("\n  \n2002\n2003\n")
    (tmp_path / "3").write_text("")
    resolver = JobResolver(tmp_path / "proc", str(tmp_path))
    assert resolver.resolve("0") == "1001"
    assert resolver.resolve("2.1") == "2002"  # first non-empty line
    assert resolver.resolve("2") is None  # the whole GPU 2 has no file
    assert resolver.resolve("3") is None
    assert JobResolver(tmp_path / "proc", None).resolve("0") is None


def test_resolution_order_explicit_then_mapping_then_scheduler(proc_root: Callable[..., Path], tmp_path: Path) -> None:
    proc_root(1, {"SLURM_JOB_ID": "from-env"})
    root = proc_root(2, {"MFUMON_JOB_ID": "explicit"})
    mapping = tmp_path / "map"
    mapping.mkdir()
    (mapping / "0").write_text("from-prolog\n")
    resolver = JobResolver(root, str(mapping))
    assert resolver.resolve("0", [GpuProcess(1, 100)]) == "from-prolog"
    assert resolver.resolve("0", [GpuProcess(1, 100), GpuProcess(2, 1)]) == "explicit"
    assert resolver.resolve("1", [GpuProcess(1, 100)]) == "from-env"


def test_largest_process_wins_and_unreadable_processes_are_skipped(proc_root: Callable[..., Path]) -> None:
    proc_root(1, {"SLURM_JOB_ID": "small"})
    root = proc_root(2, {"SLURM_JOB_ID": "big"})
    resolver = JobResolver(root)
    assert resolver.resolve("0", [GpuProcess(1, 10), GpuProcess(2, 10_000)]) == "big"
    assert resolver.resolve("0", [GpuProcess(3, 10_000), GpuProcess(1, 10)]) == "small"
    assert resolver.resolve("0", [GpuProcess(3, None)]) is None


def test_reused_pid_is_read_again(proc_root: Callable[..., Path]) -> None:
    root = proc_root(7, {"SLURM_JOB_ID": "first"}, start=100)
    resolver = JobResolver(root)
    assert resolver.resolve("0", [GpuProcess(7)]) == "first"
    proc_root(7, {"SLURM_JOB_ID": "second"}, start=200)  # the PID now belongs to another process
    assert resolver.resolve("0", [GpuProcess(7)]) == "second"
