"""The bounded spool: order, persistence across restarts, atomic files, and dropping the oldest on overflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from mfumon.exporter.node.spool import DiskSpool, MemorySpool, Spool


def _drain(spool: Spool) -> list[bytes]:
    out = []
    while (head := spool.peek()) is not None:
        out.append(head[1])
        spool.remove(head[0])
    return out


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_batches_come_back_in_order(kind: str, tmp_path: Path) -> None:
    spool: Spool = DiskSpool(tmp_path, 10_000) if kind == "disk" else MemorySpool(10_000)
    for i in range(25):
        spool.put(f"batch-{i}".encode())
    assert len(spool) == 25
    assert spool.size_bytes == sum(len(f"batch-{i}") for i in range(25))
    assert _drain(spool) == [f"batch-{i}".encode() for i in range(25)]
    assert len(spool) == 0 and spool.size_bytes == 0


def test_disk_spool_survives_a_restart_and_keeps_numbering(tmp_path: Path) -> None:
    first = DiskSpool(tmp_path, 10_000)
    for i in range(3):
        first.put(f"old-{i}".encode())
    key, _ = first.peek() or (None, b"")
    first.remove(key)  # delivered before the restart
    second = DiskSpool(tmp_path, 10_000)
    second.put(b"new-0")
    assert _drain(second) == [b"old-1", b"old-2", b"new-0"]
    assert list(tmp_path.iterdir()) == []


def test_disk_spool_files_are_written_atomically(tmp_path: Path) -> None:
    (tmp_path / ".00000000000000000007.tmp").write_bytes(b"half a batch")  # a crash mid-write
    (tmp_path / "README").write_text("not a batch")
    spool = DiskSpool(tmp_path, 10_000)
    spool.put(b"whole")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00000000000000000000.batch", "README"]
    assert (tmp_path / names[0]).read_bytes() == b"whole"


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_overflow_drops_the_oldest_and_counts(kind: str, tmp_path: Path) -> None:
    spool: Spool = DiskSpool(tmp_path, 100) if kind == "disk" else MemorySpool(100)
    dropped = [spool.put(bytes([65 + i]) * 30) for i in range(5)]  # 30 bytes each, 3 fit
    assert dropped == [0, 0, 0, 1, 1]
    assert spool.dropped_total == 2
    assert spool.size_bytes == 90
    assert [b[:1] for b in _drain(spool)] == [b"C", b"D", b"E"]
    assert spool.put(b"x" * 101) == 1  # larger than the bound on its own
    assert len(spool) == 0 and spool.dropped_total == 3


def test_an_unreadable_spooled_batch_is_skipped(tmp_path: Path) -> None:
    spool = DiskSpool(tmp_path, 10_000)
    spool.put(b"a")
    spool.put(b"b")
    (tmp_path / "00000000000000000000.batch").unlink()  # removed behind the spool's back
    assert _drain(spool) == [b"b"]
    assert spool.dropped_total == 1
