"""Which group a communicator's figures are pushed under (issue 61): the parallelism its name says, as profiles map
PyTorch's and Megatron's group names, else the name as set, else NCCL's id."""

from __future__ import annotations

from pathlib import Path

from mfumon.exporter.node.nccl_inspector.source import InspectorSource
from mfumon.exporter.node.nccl_inspector.totals import RunningTotals
from tests.exporter.node.nccl_inspector.lines import render


def test_named_communicators_map_to_their_parallelism_and_unnamed_ones_keep_their_id(tmp_path: Path) -> None:
    lines = [
        render(pid=5, comm_id="0x5a1c93e0d7b214", comm_name="DP Group 0", sn=1),
        render(pid=5, comm_id="0x11111111111111", comm_name="TENSOR_MODEL_PARALLEL_GROUP", sn=1, op="AllGather"),
        render(pid=5, comm_id="0x22222222222222", comm_name="my-ring", sn=1),
        render(pid=5, comm_id="0x33333333333333", comm_name="unknown", sn=1),
        render(pid=5, comm_id="0x44444444444444", sn=1),  # NCCL 2.28-2.29: no name at all
    ]
    (tmp_path / "node-a-pid5.log").write_text("".join(line + "\n" for line in lines))
    rows = RunningTotals().add(InspectorSource(tmp_path, job_of_pid={5: "j"}.get, first_read="all").collect(1e9))
    assert sorted((row.group, row.collective) for row in rows) == [
        ("0x33333333333333", "AllReduce"),
        ("0x44444444444444", "AllReduce"),
        ("dp", "AllReduce"),
        ("my-ring", "AllReduce"),
        ("tp", "AllGather"),
    ]


def test_a_group_of_several_communicators_counts_the_node_s_processes_and_the_ranks_they_reach(tmp_path: Path) -> None:
    """Pipeline parallelism over two nodes: each of this node's 8 processes is rank 0 of its own 2-rank
    communicator. The group holds 8 ranks here (not 1: rank numbers repeat across communicators) and reaches 16, so
    it crosses nodes; a tensor-parallel communicator of all 8 local ranks reaches 8 and stays inside."""
    for pid in range(8):
        pp = render(pid=100 + pid, comm_id=f"0x{pid + 1:014x}", comm_name="PIPELINE_MODEL_PARALLEL_GROUP", rank=0,
                    n_ranks=2, nnodes=2, sn=1, p2p=True, op="Send")  # fmt: skip
        tp = render(pid=100 + pid, comm_id="0x7f8c496ae9f661", comm_name="TENSOR_MODEL_PARALLEL_GROUP", rank=pid,
                    n_ranks=8, sn=1, op="AllGather")  # fmt: skip
        (tmp_path / f"node-a-pid{100 + pid}.log").write_text(pp + "\n" + tp + "\n")
    source = InspectorSource(tmp_path, job_of_pid=lambda pid: "j", first_read="all")
    rows = {(row.group, row.collective): row for row in RunningTotals().add(source.collect(1e9))}
    pp, tp = rows[("pp", "Send")], rows[("tp", "AllGather")]
    assert (pp.ranks, pp.n_ranks) == (8, 16)
    assert (tp.ranks, tp.n_ranks) == (8, 8)
