"""Per-rank figures (issue 61): each rank's GPU-timed operations, kernel seconds and bytes per communicator, op and
P2P peer over one interval, from the window through the source to the push's ``collective_ranks``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.exporter.node import agent
from mfumon.exporter.node.nccl_inspector.cycle import InspectingAgent
from mfumon.exporter.node.nccl_inspector.jsonl import parse_line
from mfumon.exporter.node.nccl_inspector.ranks import rank_collectives
from mfumon.exporter.node.nccl_inspector.records import CollRecord
from mfumon.exporter.node.nccl_inspector.source import InspectorBatch, InspectorCounters, InspectorSource
from mfumon.exporter.node.nccl_inspector.window import RankFigures, SequenceTracker, Window, aggregate
from mfumon.exporter.node.settings import build_parser, load_settings
from mfumon.exporter.node.sources.sim import SimSource
from mfumon.exporter.samples import MAX_COLLECTIVE_RANKS, NodeBatch
from tests.exporter.node.nccl_inspector.lines import fixture_lines, render

DP = "0x5a1c93e0d7b214"  # the "DP Group 0" communicator of constructed-2.30.jsonl (rank 1 of 4)
UNNAMED = "0x3c0ffee1234567"  # its communicator named "unknown" (rank 5 of 32)


def _window(lines: list[str]) -> Window:
    records = []
    for line in lines:
        parsed = parse_line(line)
        assert isinstance(parsed, CollRecord)
        records.append(parsed)
    return aggregate(records, SequenceTracker())


def _rank(window: Window | InspectorBatch, op: str, peer: int | None = None) -> RankFigures:
    (row,) = [r for r in window.ranks if r.op == op and r.peer == peer]
    return row


def _write(path: Path, lines: list[str], mode: str = "w") -> None:
    with open(path, mode) as handle:
        handle.write("".join(line + "\n" for line in lines))


def test_a_ranks_seconds_and_bytes_by_nccls_definitions() -> None:
    window = _window(fixture_lines("constructed-2.30.jsonl"))
    allreduce = _rank(window, "AllReduce")
    assert (allreduce.pid, allreduce.comm_id, allreduce.comm_key) == (4242, DP, "DP Group 0")
    assert (allreduce.rank, allreduce.n_ranks, allreduce.operations) == (1, 4, 2)
    assert allreduce.seconds == pytest.approx((9498 + 9502) / 1e6)
    assert allreduce.traffic_bytes == 2 * 4294967296
    assert allreduce.bus_bytes == pytest.approx(2 * 4294967296 * 2 * 3 / 4)
    gather = _rank(window, "AllGather")  # the record's size is per rank: x 32 ranks
    assert (gather.comm_id, gather.rank, gather.n_ranks) == (UNNAMED, 5, 32)
    assert gather.traffic_bytes == 4194304 * 32
    assert gather.bus_bytes == pytest.approx(4194304 * 32 * 31 / 32)
    assert gather.bus_bytes / 1e9 / gather.seconds == pytest.approx(132.003476, rel=1e-5)  # NCCL's own busbw


def test_p2p_figures_are_per_peer_and_collectives_have_none() -> None:
    window = _window(fixture_lines("constructed-2.30.jsonl"))
    send, recv = _rank(window, "Send", peer=2), _rank(window, "Recv", peer=0)
    assert (send.kind, send.operations, send.traffic_bytes, send.bus_bytes) == ("p2p", 1, 536870912, 536870912.0)
    assert recv.seconds == pytest.approx(1160e-6)
    lines = [render(op="Send", sn=n, p2p=True, peer=3 if n % 2 else 5, comm_name="pp", us=100 * n) for n in (1, 2, 3)]
    peers = {r.peer: (r.operations, r.seconds) for r in _window(lines).ranks}
    assert peers == {3: (2, pytest.approx(400e-6)), 5: (1, pytest.approx(200e-6))}
    assert all(r.peer is None for r in window.ranks if r.kind == "coll")


def test_duplicates_count_once_and_host_timed_or_unknown_ops_not_at_all() -> None:
    lines = [render(sn=1, us=100), render(sn=1, us=100), render(sn=2, us=300)]  # the second is a duplicate
    lines += [render(sn=3, us=5000, timing="kernel_cpu"), render(sn=4, us=7000, timing="collective_cpu")]
    lines += [render(op="Invalid", sn=1, us=900)]
    window = _window(lines)
    assert window.duplicates == 1
    (row,) = window.ranks
    assert (row.op, row.operations, row.seconds) == ("AllReduce", 2, pytest.approx(400e-6))
    allreduce = next(r for r in window.rows if r.op == "AllReduce")
    assert (allreduce.gpu_count, allreduce.cpu_count) == (2, 2)  # the rows still count them, apart


def test_the_source_joins_ranks_to_jobs_and_bounds_them(tmp_path: Path) -> None:
    _write(tmp_path / "nvl72004-T01-pid4242.log", fixture_lines("constructed-2.30.jsonl"))
    _write(tmp_path / "node-a-pid77.log", [render(pid=77, sn=1, us=50)])
    batch = InspectorSource(tmp_path, job_of_pid={4242: "train-1"}.get, first_read="all").collect(time.time())
    assert {r.job_id for r in batch.ranks if r.pid == 4242} == {"train-1"}
    assert [r.job_id for r in batch.ranks if r.pid == 77] == [None]
    assert len(batch.ranks) == 6 and batch.counters.rank_rows_dropped == 0
    assert batch.to_json()["ranks"][0]["seconds"] == max(r.seconds for r in batch.ranks)
    bounded = InspectorSource(tmp_path, job_of_pid={4242: "train-1"}.get, first_read="all", max_rows=2)
    small = bounded.collect(time.time())
    assert [r.op for r in small.ranks] == ["AllReduce", "Recv"]  # the most kernel time kept (19 ms, 1.16 ms)
    assert small.counters.rank_rows_dropped == 4


def _batch(ranks: list[RankFigures], interval: float | None = 10.0) -> InspectorBatch:
    return InspectorBatch(1e9, interval, "/dump", (), (), InspectorCounters(), tuple(ranks))


def _figures(**changes: object) -> RankFigures:
    base: dict[str, object] = dict(
        job_id="j1",
        pid=7,
        comm_id=DP,
        comm_key="DP Group 0",
        kind="coll",
        op="AllReduce",
        rank=0,
        n_ranks=4,
        peer=None,
        operations=10,
        seconds=0.5,
        traffic_bytes=1000,
        bus_bytes=1500.0,
    )
    return RankFigures(**{**base, **changes})  # type: ignore[arg-type]


def test_push_rows_carry_the_totals_group_and_the_interval() -> None:
    rows = rank_collectives(_batch([_figures(), _figures(comm_id=UNNAMED, comm_key=UNNAMED, rank=5)])).rows
    assert sorted((r.group, r.comm_id, r.rank) for r in rows) == [(UNNAMED, UNNAMED, 5), ("dp", DP, 0)]
    assert all(r.interval_seconds == 10.0 and r.operations == 10 for r in rows)
    send = _figures(kind="p2p", op="Send", peer=3, comm_key="PIPELINE_MODEL_PARALLEL_GROUP")
    (row,) = rank_collectives(_batch([send])).rows
    assert (row.group, row.collective, row.peer) == ("pp", "Send", 3)


def test_no_rows_without_an_interval() -> None:
    assert rank_collectives(_batch([_figures()], interval=None)).rows == ()  # the first collection
    assert rank_collectives(_batch([_figures()], interval=0.0)).rows == ()
    assert rank_collectives(_batch([_figures()], interval=2 * 86_400.0)).rows == ()


def test_rows_the_push_cannot_carry_are_left_out() -> None:
    ranks = [
        _figures(job_id=None),  # a pid no job claims
        _figures(op="All2All"),  # NCCL's name, not one the push takes
        _figures(comm_id="0xABCDEF"),  # not NCCL's lower-case hex
        _figures(comm_id="0x" + "f" * 17),
        _figures(job_id="bad job"),
        _figures(seconds=float("inf")),
        _figures(rank=20_000_000, n_ranks=20_000_001),
    ]
    result = rank_collectives(_batch(ranks))
    assert result.rows == () and result.refused == 5 and result.dropped == 0


def test_a_name_the_aggregator_refuses_falls_back_to_the_id() -> None:
    for name in ("@ring", "my ring\n"):  # "$" alone would let the newline through; the aggregator would not
        (row,) = rank_collectives(_batch([_figures(comm_key=name)])).rows
        assert row.group == DP


def test_the_same_rank_from_two_pids_is_one_row() -> None:
    (row,) = rank_collectives(_batch([_figures(pid=7), _figures(pid=8, n_ranks=8)])).rows
    assert (row.operations, row.seconds, row.traffic_bytes, row.n_ranks) == (20, 1.0, 2000.0, 8)


def test_the_bound_keeps_the_most_kernel_time() -> None:
    ranks = [_figures(rank=r, n_ranks=1000, seconds=float(r)) for r in range(MAX_COLLECTIVE_RANKS + 10)]
    result = rank_collectives(_batch(ranks))
    assert len(result.rows) == MAX_COLLECTIVE_RANKS and result.dropped == 10
    assert result.rows[0].rank == MAX_COLLECTIVE_RANKS + 9 and min(r.rank for r in result.rows) == 10
    small = rank_collectives(_batch(ranks), max_rows=3)
    assert [r.rank for r in small.rows] == [521, 520, 519] and small.dropped == MAX_COLLECTIVE_RANKS + 7


def _settings(*argv: str):  # type: ignore[no-untyped-def]
    return load_settings(build_parser().parse_args(["--url", "http://127.0.0.1:9", "--node", "n1", *argv]))


def test_the_pushed_body_carries_collective_ranks_the_aggregator_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the sender gets: the body the aggregator validates, GPU samples and both Inspector lists."""
    node_agent = agent.build_agent(_settings("--nccl-inspector.dir", str(tmp_path)), SimSource(node="n1", count=2))
    assert isinstance(node_agent, InspectingAgent) and node_agent.inspector is not None
    node_agent.inspector.job_of_pid = {77: "j1", 78: "j1"}.get  # type: ignore[method-assign]
    start = time.time()
    clock: Iterator[float] = iter([start, start + 10.0])
    monkeypatch.setattr(node_agent, "_clock", lambda: next(clock))
    submitted: list[NodeBatch] = []
    monkeypatch.setattr(node_agent.sender, "submit", submitted.append)
    dp, pp = "0x00c0ffee00d00d", "0x0000000000fade"

    def lines(rank: int, sn: int) -> list[str]:
        """Rank ``rank`` (pid 77 + rank) of a 4-rank dp communicator and a 2-rank pipeline one, 2.30 lines."""
        pid = 77 + rank
        return [
            render(
                op="ReduceScatter", sn=sn, comm_id=dp, comm_name="DP Group 0", rank=rank, n_ranks=4, pid=pid, us=300
            ),
            render(op="AllGather", sn=sn, comm_id=dp, comm_name="DP Group 0", rank=rank, n_ranks=4, pid=pid, us=250),
            render(
                op=("Send", "Recv")[rank],
                sn=sn,
                p2p=True,
                peer=1 - rank,
                comm_id=pp,
                comm_name="pp",
                rank=rank,
                n_ranks=2,
                pid=pid,
                us=900,
            ),
        ]

    for sn, mode in ((1, "w"), (2, "a")):
        for rank in (0, 1):
            _write(tmp_path / f"n1-pid{77 + rank}.log", lines(rank, sn), mode)
        node_agent.collect_once()
    first, second = submitted
    assert first.collectives is not None and first.collective_ranks is None  # no interval yet
    assert second.collective_ranks is not None and len(second.collective_ranks) == 6
    body = second.body()
    sample = NodeSampleCreate.model_validate(body)
    assert sample.collective_ranks is not None and len(sample.collective_ranks) == 6
    by_key = {(r.collective, r.rank, r.peer): r for r in sample.collective_ranks}
    assert by_key[("Send", 0, 1)].group == "pp" and by_key[("Recv", 1, 0)].comm_id == pp
    gather = by_key[("AllGather", 0, None)]
    assert (gather.group, gather.operations, gather.interval_seconds) == ("dp", 1, 10.0)
    assert gather.traffic_bytes == (1 << 20) * 4 and gather.seconds == pytest.approx(250e-6)
