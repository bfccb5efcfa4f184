"""The demo's simulated NCCL 2.30 dumps through the real reader: on ``mfumon demo``'s llama3-8b node the per-rank
figures show the late rank and the slow pipeline link the demo plants, and nothing else; over its three-node
llama3-70b job's nodes, one node's communicators across nodes run at a third of the others' bandwidth."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from statistics import mean

import pytest

from mfumon.exporter.demo.simcluster import SimJob, default_cluster
from mfumon.exporter.demo.siminspector import PID_BASE, SimInspector
from mfumon.exporter.node.nccl_inspector.ranks import rank_collectives
from mfumon.exporter.node.nccl_inspector.source import InspectorBatch
from mfumon.exporter.samples import RankCollective

THREE_NODE_JOB = "pretrain-llama3-70b-3node"


def _job(job_id: str) -> SimJob:
    (job,) = [job for job in default_cluster().jobs if job.job_id == job_id]
    return job


def test_the_jobs_with_inspector_output() -> None:
    jobs = {job.job_id: {name for name, _ in job.placement} for job in default_cluster().jobs if job.collectives}
    assert jobs == {"pretrain-llama3-8b": {"gpu-h100-01"}, THREE_NODE_JOB: {f"gpu-h100-0{i}" for i in (7, 8, 9)}}


@pytest.fixture(scope="module")
def rows() -> Iterator[tuple[RankCollective, ...]]:
    job = _job("pretrain-llama3-8b")
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


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[dict[str, tuple[InspectorBatch, list[dict[str, object]]]]]:
    """Each node of the three-node job: a read 2 s after the first (less than its 5 s step) and its files' lines."""
    job = _job(THREE_NODE_JOB)
    nodes = sorted({name for name, _ in job.placement})
    assert job.collectives is not None
    sims = [
        SimInspector(
            job_id=job.job_id,
            node=node,
            nodes=nodes,
            ranks_per_node=8,
            step_seconds=job.step_seconds,
            spec=job.collectives,
        )
        for node in nodes
    ]
    try:
        out = {}
        for sim in sims:
            sim.collect(1.7e9)
            batch = sim.collect(1.7e9 + 2.0)
            assert batch.counters.lines_skipped == batch.counters.lost == batch.counters.busbw_disagreements == 0
            lines = []
            for name in sorted(os.listdir(sim.directory)):
                with open(os.path.join(sim.directory, name), encoding="utf-8") as handle:
                    lines += [json.loads(line) for line in handle]
            out[sim.node] = (batch, lines)
        yield out
    finally:
        for sim in sims:
            sim.close()


def test_each_node_writes_its_own_ranks_as_nccl_does(
    three_nodes: dict[str, tuple[InspectorBatch, list[dict[str, object]]]],
) -> None:
    owners: dict[tuple[str, int], str] = {}
    for node, (_batch, lines) in three_nodes.items():
        assert {line["metadata"]["hostname"] for line in lines} == {node}  # type: ignore[index]
        assert {line["metadata"]["pid"] for line in lines} == set(range(PID_BASE, PID_BASE + 8))  # type: ignore[index]
        for line in lines:
            header = line["header"]
            assert isinstance(header, dict)
            assert list(header) == ["id", "comm_name", "rank", "n_ranks", "nnodes"]  # NCCL 2.30's key order
            # tp inside a node; every dp (3 ranks) and pp (2 ranks) communicator spans two of the three nodes
            expected = {"tp": (4, 1), "dp": (3, 2), "pp": (2, 2)}[header["comm_name"]]
            assert (header["n_ranks"], header["nnodes"]) == expected
            assert owners.setdefault((header["id"], header["rank"]), node) == node  # a rank lives on one node
        # the first read wrote one step's records before it, the second spread its rounds over the 2 s since
        stamps = sorted(line["metadata"]["dump_timestamp_us"] / 1e6 for line in lines)  # type: ignore[index]
        assert stamps[0] > 1.7e9 - 5.0 and 1.7e9 + 2.0 - 0.05 < stamps[-1] <= 1.7e9 + 2.0
    comm_ids = {comm_id for comm_id, _ in owners}
    assert len(comm_ids) == 6 + 8 + 12  # tp, dp and pp communicators, one id for each on every node
    assert len(owners) == 24 * 3  # each of the 24 GPUs holds one rank of each group


def _bandwidth_gbs(batch: InspectorBatch, group: str) -> float:
    """The node's bus bandwidth on ``group`` over the read, from its own ranks' records."""
    rows = [row for row in rank_collectives(batch).rows if row.group == group]
    assert rows, group  # a read shorter than a step still carries every group's records
    return sum(row.bus_bytes for row in rows) / sum(row.seconds for row in rows) / 1e9


def test_one_node_runs_its_collectives_across_nodes_at_a_third(
    three_nodes: dict[str, tuple[InspectorBatch, list[dict[str, object]]]],
) -> None:
    gbs = {
        (node, group): _bandwidth_gbs(batch, group)
        for node, (batch, _) in three_nodes.items()
        for group in ("dp", "tp", "pp")
    }
    for node in ("gpu-h100-07", "gpu-h100-09"):
        assert gbs[node, "dp"] == pytest.approx(40, rel=0.05) and gbs[node, "pp"] == pytest.approx(11, rel=0.05)
        assert gbs["gpu-h100-08", "dp"] == pytest.approx(gbs[node, "dp"] / 3, rel=0.08)
        assert gbs["gpu-h100-08", "pp"] == pytest.approx(gbs[node, "pp"] / 3, rel=0.08)
    # inside a node (NVLink) the slow node's tensor-parallel collectives keep their pace
    assert all(gbs[node, "tp"] == pytest.approx(360, rel=0.05) for node in three_nodes)
