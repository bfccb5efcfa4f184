"""The demo's simulated NCCL 2.30 dumps (``mfumon demo``'s llama3-8b node) through the real reader: the per-rank
figures show the late rank and the slow pipeline link the demo plants, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from statistics import mean

import pytest

from mfumon.exporter.demo.simcluster import default_cluster
from mfumon.exporter.demo.siminspector import SimInspector
from mfumon.exporter.node.nccl_inspector.ranks import rank_collectives
from mfumon.exporter.samples import RankCollective


@pytest.fixture(scope="module")
def rows() -> Iterator[tuple[RankCollective, ...]]:
    (job,) = [job for job in default_cluster().jobs if job.collectives is not None]
    nodes = {name for name, _ in job.placement}
    (node,) = nodes
    assert job.collectives is not None
    sim = SimInspector(
        job_id=job.job_id, node=node, nodes=nodes, ranks_per_node=8, step_seconds=job.step_seconds, spec=job.collectives
    )
    try:
        assert rank_collectives(sim.collect(1.7e9)).rows == ()  # the first read has no interval
        batch = sim.collect(1.7e9 + 10.0)
        assert batch.counters.lines_skipped == batch.counters.lost == batch.counters.busbw_disagreements == 0
        yield rank_collectives(batch).rows
    finally:
        sim.close()


def _per_op_ms(row: RankCollective) -> float:
    return row.seconds / row.operations * 1e3


def test_one_rank_of_one_dp_communicator_is_late(rows: tuple[RankCollective, ...]) -> None:
    for op in ("AllGather", "ReduceScatter", "AllReduce"):
        comms: dict[str, dict[int, RankCollective]] = {}
        for row in rows:
            if row.collective == op:
                comms.setdefault(row.comm_id, {})[row.rank] = row
        assert len(comms) == 2 and all(len(ranks) == 4 for ranks in comms.values())  # 2 stages x 4-way dp
        (late_comm,) = [
            c for c in comms.values() if min(map(_per_op_ms, c.values())) < 0.5 * max(map(_per_op_ms, c.values()))
        ]
        assert min(late_comm.values(), key=_per_op_ms).rank == 2
        peers = [_per_op_ms(r) for rank, r in late_comm.items() if rank != 2]
        assert _per_op_ms(late_comm[2]) == pytest.approx(mean(peers) / 3, rel=0.02)  # a third of its peers'
        sizes = {r.traffic_bytes / r.operations for c in comms.values() for r in c.values()}
        assert len(sizes) == 1  # every rank writes the same message size


def test_one_pipeline_link_is_slow_at_both_ends(rows: tuple[RankCollective, ...]) -> None:
    p2p = [row for row in rows if row.peer is not None]
    assert {row.group for row in p2p} == {"pp"} and {row.collective for row in p2p} == {"Send", "Recv"}
    assert all(row.traffic_bytes / row.operations >= 16 * 1024**2 for row in p2p)
    gbs: dict[str, list[float]] = {row.comm_id: [] for row in p2p}
    for row in p2p:
        gbs[row.comm_id].append(row.bus_bytes / row.seconds / 1e9)
    slow = [comm for comm, figures in gbs.items() if max(figures) < 60]
    assert len(gbs) == 4 and len(slow) == 1
    assert all(f == pytest.approx(40, rel=0.1) for f in gbs[slow[0]])
    assert all(f == pytest.approx(350, rel=0.1) for comm, figures in gbs.items() if comm != slow[0] for f in figures)
