"""From NCCL Inspector's files to the aggregator's series (issue 61): each cycle folded into running totals per job,
group and collective, carried by the node push, taken by the real aggregator and rendered per job."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from mfumon.exporter.node.nccl_inspector.source import InspectorSource
from mfumon.exporter.node.nccl_inspector.totals import FORGET_SECONDS, RunningTotals
from mfumon.exporter.samples import GpuSample, NodeBatch
from tests.exporter.node.nccl_inspector.lines import render
from tests.utils.factories import metric_value, report, scrape

T0 = 1.8e9


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as handle:
        handle.write("".join(line + "\n" for line in lines))


def _allreduce(sn: int, rank: int, us: int = 1000) -> str:
    """An 8-rank AllReduce of 64 MiB on communicator "dp" of pid 4242 (rank 0-3 of the node's) in 2.30's format."""
    return render(pid=4242, host="n1", comm_id="0x5a1c93e0d7b214", comm_name="dp", rank=rank, n_ranks=8, nnodes=2,
                  sn=sn, size=64 << 20, us=us)  # fmt: skip


def test_cycles_fold_into_counters_the_aggregator_renders_per_job(tmp_path: Path, client: TestClient) -> None:
    client.app.state.ctx.clock = lambda: T0 + 20  # type: ignore[attr-defined]
    log = tmp_path / "n1-pid4242.log"
    _append(log, [_allreduce(1, rank) for rank in range(4)])
    source = InspectorSource(tmp_path, job_of_pid={4242: "train-1"}.get, first_read="all")
    totals = RunningTotals()
    first = totals.add(source.collect(T0))
    (row,) = first
    assert (row.job_id, row.group, row.collective, row.ranks, row.n_ranks) == ("train-1", "dp", "AllReduce", 4, 8)
    assert (row.operations_total, row.seconds_total) == (4, pytest.approx(0.004))
    _append(log, [_allreduce(2, rank, us=2000) for rank in range(4)] + [_allreduce(4, 0)])  # rank 0 skips sn 3
    (row,) = totals.add(source.collect(T0 + 10))
    assert (row.operations_total, row.seconds_total, row.lost_total) == (9, pytest.approx(0.013), 1)
    assert (row.window_seconds, row.interval_seconds) == (pytest.approx(0.009), 10.0)
    # NCCL's bus bandwidth: 2(n-1)/n x 64 MiB per operation, over the GPU-timed seconds.
    assert row.window_bus_bytes / row.window_seconds == pytest.approx(5 * 2 * 7 / 8 * (64 << 20) / 0.009)

    assert client.post("/v1/jobs/train-1/reports", json=report(num_gpus=8)).is_success
    gpus = tuple(GpuSample(f"GPU-n1-{i}", i, "NVIDIA H100 80GB HBM3", job_id="train-1") for i in range(4))
    batch = NodeBatch("n1", T0 + 10, gpus, collectives=(row,))
    assert client.post("/v1/nodes/n1/samples", json=batch.body()).is_success
    text = scrape(client)
    labels = {"job_id": "train-1", "group": "dp", "collective": "AllReduce"}
    assert metric_value(text, "mfumon_job_collective_seconds_total", **labels) == pytest.approx(0.013)
    assert metric_value(text, "mfumon_job_collective_records_lost_total", job_id="train-1", group="dp") == 1
    bandwidth = metric_value(text, "mfumon_job_collective_bus_bandwidth_bytes_per_second", job_id="train-1", group="dp")
    assert bandwidth == pytest.approx(row.window_bus_bytes / row.window_seconds)
    ratio = metric_value(text, "mfumon_job_collective_time_ratio", job_id="train-1", group="dp")
    assert ratio == pytest.approx(0.009 / (4 * 10.0))


def test_unclaimed_pids_and_ops_the_push_does_not_name_stay_on_the_node_and_silent_jobs_are_forgotten(
    tmp_path: Path,
) -> None:
    log = tmp_path / "n1-pid7.log"
    _append(log, [render(pid=7, host="n1", op="Invalid", sn=1), render(pid=8, host="n1", sn=1)])
    source = InspectorSource(tmp_path, job_of_pid={7: "j"}.get, first_read="all")
    totals = RunningTotals()
    assert totals.add(source.collect(T0)) == ()  # j's only op is NCCL's "Invalid"; pid 8 belongs to no job
    _append(log, [render(pid=7, host="n1", sn=1, op="AllGather")])
    (row,) = totals.add(source.collect(T0 + 10))
    assert (row.job_id, row.group, row.collective) == ("j", "0x7f8c496ae9f661", "AllGather")  # no name: its id
    (quiet,) = totals.add(source.collect(T0 + 20))
    assert quiet.window_seconds == 0 and quiet.interval_seconds == 0  # still counted, nothing new
    assert totals.add(source.collect(T0 + 20 + FORGET_SECONDS + 1)) == ()
