"""One interval's records per (pid, communicator, op): GPU-timed totals, time-weighted bandwidth, lost records."""

from __future__ import annotations

import pytest

from mfumon.exporter.node.nccl_inspector.jsonl import parse_line
from mfumon.exporter.node.nccl_inspector.records import CollRecord
from mfumon.exporter.node.nccl_inspector.window import P2P_ANY, OpFigures, SequenceTracker, aggregate
from tests.exporter.node.nccl_inspector.lines import fixture_lines, render


def _records(lines: list[str]) -> list[CollRecord]:
    out = []
    for line in lines:
        parsed = parse_line(line)
        assert isinstance(parsed, CollRecord)
        out.append(parsed)
    return out


def _row(rows: tuple[OpFigures, ...], op: str, comm: str | None = None) -> OpFigures:
    (row,) = [r for r in rows if r.op == op and (comm is None or r.comm_key == comm)]
    return row


def test_coll_sn_gaps_in_2_28_are_lost_records_not_totals() -> None:
    records = _records(fixture_lines("constructed-2.28-gaps.jsonl"))  # coll_sn 1407, 1408, 1411, 1412, 1420
    window = aggregate(records, SequenceTracker())
    row = _row(window.rows, "AllReduce")
    assert (row.count, row.lost, window.lost) == (5, 2 + 7, 9)
    assert row.gpu_seconds == pytest.approx(5 * 0.061974)
    assert row.traffic_bytes == 5 * 17179869184  # the lost ones are never guessed in


def test_lost_records_carry_over_between_intervals() -> None:
    records = _records(fixture_lines("constructed-2.28-gaps.jsonl"))
    tracker = SequenceTracker()
    first, second = aggregate(records[:2], tracker), aggregate(records[2:], tracker)
    assert (first.lost, second.lost) == (0, 9)
    tracker.forget_pid(1639453)  # the file restarted: numbers start over, no gap to the old ones
    assert aggregate(_records([render(pid=1639453, sn=1, comm_id="0x7f8c496ae9f661")]), tracker).lost == 0


def test_sequences_are_per_communicator_rank_and_op() -> None:
    lines = [render(op="AllReduce", sn=5), render(op="AllGather", sn=9), render(op="AllReduce", sn=6)]
    lines += [render(op="AllReduce", sn=100, rank=1), render(op="AllReduce", sn=7, comm_id="0x1")]
    assert aggregate(_records(lines), SequenceTracker()).lost == 0


def test_p2p_gaps_go_to_one_row_for_all_p2p_ops() -> None:
    """p2p_sn is one counter per communicator across Send and Recv (inspector_plugin.cc, 2.30)."""
    lines = [render(op="Send", sn=1, p2p=True, comm_name="pp"), render(op="Recv", sn=2, p2p=True, comm_name="pp")]
    lines += [render(op="Send", sn=5, p2p=True, comm_name="pp")]
    window = aggregate(_records(lines), SequenceTracker())
    assert _row(window.rows, P2P_ANY).lost == 2 and _row(window.rows, P2P_ANY).count == 0
    assert _row(window.rows, "Send").count == 2 and _row(window.rows, "Send").lost == 0
    assert not _row(window.rows, P2P_ANY).known_op


def test_duplicates_are_left_out_and_late_records_count() -> None:
    lines = [render(sn=1), render(sn=3), render(sn=3), render(sn=2)]
    tracker = SequenceTracker()
    window = aggregate(_records(lines[:2]), tracker)
    assert window.lost == 1
    window = aggregate(_records(lines[2:]), tracker)
    assert (window.duplicates, window.late) == (1, 1)
    row = _row(window.rows, "AllReduce")
    assert (row.count, row.duplicates, row.late) == (1, 1, 1)


def test_time_and_bandwidth_come_from_gpu_timed_records_only() -> None:
    lines = [
        render(sn=1, size=1 << 30, us=10000),
        render(sn=2, size=1 << 30, us=40000),
        render(sn=3, size=1 << 30, us=90000, timing="kernel_cpu"),
        render(sn=4, size=1 << 30, us=90000, timing="collective_cpu"),
    ]
    row = _row(aggregate(_records(lines), SequenceTracker()).rows, "AllReduce")
    assert (row.count, row.gpu_count, row.cpu_count) == (4, 2, 2)
    assert row.gpu_seconds == pytest.approx(0.05) and row.cpu_seconds == pytest.approx(0.18)
    # Time-weighted: sum of bus bytes over sum of seconds, not the mean of each record's bandwidth.
    bus = 2 * (1 << 30) * 1.75
    assert row.busbw_gbs == pytest.approx(bus / 1e9 / 0.05)
    assert row.algbw_gbs == pytest.approx(2 * (1 << 30) / 1e9 / 0.05)
    mean_of_records = ((1 << 30) * 1.75 / 1e9 / 0.01 + (1 << 30) * 1.75 / 1e9 / 0.04) / 2
    assert row.busbw_gbs != pytest.approx(mean_of_records)
    assert row.traffic_bytes == 4 * (1 << 30) and row.gpu_traffic_bytes == 2 * (1 << 30)


def test_per_rank_sizes_are_multiplied_out() -> None:
    (line,) = fixture_lines("readme-2.28-verbose.jsonl")
    row = _row(aggregate(_records([line]), SequenceTracker()).rows, "ReduceScatter")
    assert row.traffic_bytes == 2147483648 * 8 and row.bus_bytes == pytest.approx(2147483648 * 7)
    assert row.busbw_gbs == pytest.approx(366.134533, abs=1e-6)


def test_invalid_ops_count_their_time_without_a_bandwidth() -> None:
    row = _row(aggregate(_records([render(op="Invalid", us=500)]), SequenceTracker()).rows, "Invalid")
    assert not row.known_op and row.gpu_seconds == pytest.approx(0.0005)
    assert (row.traffic_bytes, row.busbw_gbs, row.algbw_gbs) == (0, None, None)


def test_uint8_sizes_are_counted_undone() -> None:
    (line,) = fixture_lines("constructed-2.30-uint8.jsonl")
    row = _row(aggregate(_records([line]), SequenceTracker()).rows, "AllGather")
    assert (row.wrapped_sizes, row.traffic_bytes, row.busbw_disagreements) == (1, 1048576 * 4, 0)


def test_rows_are_per_pid_and_communicator_name_else_id() -> None:
    lines = [line for line in fixture_lines("constructed-2.30.jsonl")]
    lines += [render(pid=77, comm_name="DP Group 0", sn=10, n_ranks=4)]
    rows = aggregate(_records(lines), SequenceTracker()).rows
    keys = sorted((r.pids, r.comm_key, r.op) for r in rows)
    assert keys == [
        ((77,), "DP Group 0", "AllReduce"),
        ((4242,), "0x3c0ffee1234567", "AllGather"),
        ((4242,), "0x3c0ffee1234567", "ReduceScatter"),
        ((4242,), "DP Group 0", "AllReduce"),
        ((4242,), "DP Group 0", "Recv"),
        ((4242,), "DP Group 0", "Send"),
    ]
    allreduce = next(r for r in rows if r.pids == (4242,) and r.op == "AllReduce")
    assert (allreduce.count, allreduce.ranks, allreduce.comm_ids, allreduce.n_ranks) == (
        2,
        (1,),
        ("0x5a1c93e0d7b214",),
        4,
    )


def test_the_tracker_is_bounded() -> None:
    tracker = SequenceTracker(max_keys=3)
    for pid in range(10):
        tracker.observe((pid, "0x1", 0, "coll", "AllReduce"), 1)
    assert len(tracker) == 3
