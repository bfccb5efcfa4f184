"""Following ``<host>-pid<pid>.log`` files: complete lines only, truncation, replacement, bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mfumon.exporter.node.nccl_inspector.tail import Tailer, parse_log_name
from tests.exporter.node.nccl_inspector.lines import render


def _lines(n: int, start: int = 1, **kwargs: object) -> list[str]:
    return [render(sn=sn, **kwargs) for sn in range(start, start + n)]  # type: ignore[arg-type]


def _write(path: Path, lines: list[str], mode: str = "w") -> None:
    with open(path, mode) as handle:
        handle.write("".join(line + "\n" for line in lines))


def _all_lines(tailer: Tailer) -> list[bytes]:
    return [line for tailed in tailer.read().files for line in tailed.lines]


def test_file_names() -> None:
    assert parse_log_name("example-hostname-pid1639453.log") == ("example-hostname", 1639453)
    assert parse_log_name("gpu-pid7-node-pid42.log") == ("gpu-pid7-node", 42)  # the last "-pid" separates
    assert parse_log_name("nccl_inspector_metrics_x.prom") is None
    assert parse_log_name("host-pid12.log.1") is None


def test_a_half_written_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    lines = _lines(3)
    path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:50])
    tailer = Tailer(tmp_path, first_read="all")
    read = tailer.read()
    assert [len(f.lines) for f in read.files] == [2]
    assert (read.files[0].host, read.files[0].pid, read.files[0].restarted) == ("node-a", 1000, True)
    assert read.backlog_bytes == 50  # the partial line is not consumed
    assert _all_lines(tailer) == []  # nothing new yet
    with open(path, "a") as handle:
        handle.write(lines[2][50:] + "\n")
    read = tailer.read()
    assert [line.decode() for f in read.files for line in f.lines] == [lines[2]]
    assert not read.files[0].restarted
    assert read.backlog_bytes == 0


def test_a_truncated_file_restarts_at_zero(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    _write(path, _lines(3))
    tailer = Tailer(tmp_path, first_read="all")
    assert len(_all_lines(tailer)) == 3
    _write(path, _lines(1, start=1))  # NCCL opens with "w": a new process with the same pid truncates
    read = tailer.read()
    assert read.truncations == 1 and read.files[0].restarted
    assert len(read.files[0].lines) == 1


def test_a_replaced_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    _write(path, _lines(2))
    tailer = Tailer(tmp_path, first_read="all")
    assert len(_all_lines(tailer)) == 2
    fresh = tmp_path / "fresh.tmp"
    _write(fresh, _lines(5, start=1))  # longer than the old one: size alone would not tell
    os.replace(fresh, path)
    read = tailer.read()
    assert read.replacements == 1 and read.truncations == 0
    assert read.files[0].restarted and len(read.files[0].lines) == 5


def test_vanished_files_are_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    _write(path, _lines(2))
    tailer = Tailer(tmp_path, first_read="all")
    tailer.read()
    path.unlink()
    read = tailer.read()
    assert read.vanished == 1 and read.files == () and read.files_seen == 0


def test_a_missing_directory_is_no_error(tmp_path: Path) -> None:
    read = Tailer(tmp_path / "not-yet").read()
    assert read.directory_missing and read.files == ()


def test_reads_are_bounded_and_resume(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    lines = _lines(2000)
    _write(path, lines)
    size = path.stat().st_size
    tailer = Tailer(tmp_path, first_read="all", max_bytes_per_read=128 * 1024, max_line_bytes=4096, min_file_chunk=4096)
    first = tailer.read()
    assert first.bytes_read <= 128 * 1024 and first.backlog_bytes > 0
    got = [line for f in first.files for line in f.lines]
    while True:
        more = _all_lines(tailer)
        if not more:
            break
        got += more
    assert [line.decode() for line in got] == lines
    assert tailer.read().backlog_bytes == 0 and size > 128 * 1024


def test_files_beyond_the_limit_are_counted_and_the_freshest_kept(tmp_path: Path) -> None:
    for pid in range(5):
        path = tmp_path / f"node-a-pid{pid}.log"
        _write(path, _lines(1, pid=pid))
        os.utime(path, (1000 + pid, 1000 + pid))
    read = Tailer(tmp_path, first_read="all", max_files=3).read()
    assert read.files_seen == 5 and read.files_over_limit == 2
    assert sorted(f.pid for f in read.files) == [2, 3, 4]


def test_a_line_too_long_is_dropped_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    good = _lines(2)
    path.write_text(good[0] + "\n" + "x" * 10000 + "\n" + good[1] + "\n")
    tailer = Tailer(tmp_path, first_read="all", max_line_bytes=4096, min_file_chunk=4096, max_bytes_per_read=8192)
    got: list[bytes] = []
    too_long = 0
    for _ in range(5):
        read = tailer.read()
        too_long += read.lines_too_long
        got += [line for f in read.files for line in f.lines]
    assert [line.decode() for line in got] == good and too_long == 1


def test_the_first_read_starts_near_the_end_at_a_line_boundary(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    lines = _lines(3000)
    _write(path, lines)
    tailer = Tailer(tmp_path, max_bytes_per_read=64 * 1024, max_line_bytes=4096, min_file_chunk=4096)
    got = [line.decode() for line in _all_lines(tailer)]
    assert 0 < len(got) < 3000 and got == lines[-len(got) :]
    later = tmp_path / "node-a-pid2000.log"  # a file that appears later is read from its start
    _write(later, _lines(3, pid=2000))
    assert len(_all_lines(tailer)) == 3


def test_a_far_behind_file_jumps_ahead_and_counts_what_it_skipped(tmp_path: Path) -> None:
    path = tmp_path / "node-a-pid1000.log"
    _write(path, _lines(1))
    tailer = Tailer(
        tmp_path,
        first_read="all",
        max_bytes_per_read=8192,
        max_line_bytes=4096,
        min_file_chunk=4096,
        max_backlog_bytes=65536,
    )
    tailer.read()
    lines = _lines(1000, start=2)
    _write(path, lines, mode="a")
    read = tailer.read()
    got = [line.decode() for f in read.files for line in f.lines]
    assert read.bytes_skipped > 0 and got == lines[-len(got) :]


@pytest.mark.parametrize("local", ["node-a", "node-a.cluster.example"])
def test_a_shared_directory_is_read_for_this_host_only(tmp_path: Path, local: str) -> None:
    _write(tmp_path / "node-a-pid1.log", _lines(1, pid=1))
    _write(tmp_path / "node-b-pid1.log", _lines(1, pid=1, host="node-b"))
    read = Tailer(tmp_path, first_read="all", local_host=local).read()
    assert [f.host for f in read.files] == ["node-a"] and read.foreign_files == 1


def test_a_directory_of_other_names_is_read_whole(tmp_path: Path) -> None:
    """In a container NCCL names files by the pod's hostname, which is not the node's: nothing is foreign then."""
    _write(tmp_path / "trainer-0-pid7.log", _lines(1, pid=7))
    read = Tailer(tmp_path, first_read="all", local_host="node-a").read()
    assert [f.host for f in read.files] == ["trainer-0"] and read.foreign_files == 0
