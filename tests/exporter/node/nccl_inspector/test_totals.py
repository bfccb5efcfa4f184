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
