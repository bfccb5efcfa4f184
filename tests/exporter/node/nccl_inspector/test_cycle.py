"""``--nccl-inspector.dir`` in the node agent: printed by ``--once``, collected each cycle and kept, never pushed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mfumon.exporter.node import agent
from mfumon.exporter.node.nccl_inspector.cycle import InspectingAgent
from mfumon.exporter.node.pipeline import Agent
from mfumon.exporter.node.settings import build_parser, load_settings
from mfumon.exporter.node.sources.sim import SimSource
from mfumon.exporter.samples import NodeBatch
from tests.exporter.node.nccl_inspector.lines import fixture_lines, render


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def test_the_option_and_its_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(build_parser().parse_args([])).NCCL_INSPECTOR_DIR is None
    monkeypatch.setenv("MFUMON_NCCL_INSPECTOR_DIR", str(tmp_path / "env"))
    from_env = load_settings(build_parser().parse_args([])).NCCL_INSPECTOR_DIR
    from_flag = load_settings(build_parser().parse_args(["--nccl-inspector.dir", str(tmp_path)])).NCCL_INSPECTOR_DIR
    assert (from_env, from_flag) == (tmp_path / "env", tmp_path)


def test_once_prints_the_inspector_batch_per_job(
    tmp_path: Path, proc_root: object, capsys: pytest.CaptureFixture[str]
) -> None:
    root = proc_root(4242, {"SLURM_JOB_ID": "81234"})  # type: ignore[operator]
    _write(tmp_path / "nvl72004-T01-pid4242.log", fixture_lines("constructed-2.30.jsonl"))
    (tmp_path / "nvl72004-T01-pid4243.log").write_text(render(pid=4243, sn=1)[:-5])  # half-written: waits
    argv = ["--source", "sim", "--sim.gpus", "1", "--node", "n1", "--once", "--proc-root", str(root)]
    assert agent.main([*argv, "--nccl-inspector.dir", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [g["index"] for g in printed["gpus"]] == [0]  # the node sample is as before
    inspector = printed["nccl_inspector"]
    (job,) = inspector["jobs"]
    assert job["job_id"] == "81234"
    assert sorted(c["comm"] for c in job["communicators"]) == ["0x3c0ffee1234567", "DP Group 0"]
    assert inspector["counters"]["records"] == 6 and inspector["counters"]["lines_skipped"] == 0


def test_without_the_option_once_prints_what_it_did(capsys: pytest.CaptureFixture[str]) -> None:
    assert agent.main(["--source", "sim", "--sim.gpus", "1", "--node", "n1", "--once"]) == 0
    assert "nccl_inspector" not in json.loads(capsys.readouterr().out)


def _settings(*argv: str):  # type: ignore[no-untyped-def]
    return load_settings(build_parser().parse_args(["--url", "http://127.0.0.1:9", "--node", "n1", *argv]))


def test_the_agent_keeps_the_latest_batch_each_cycle(tmp_path: Path) -> None:
    source = SimSource(node="n1", count=2)
    plain = agent.build_agent(_settings(), source)
    assert type(plain) is Agent  # no option: the agent as it was
    node_agent = agent.build_agent(_settings("--nccl-inspector.dir", str(tmp_path)), source)
    assert isinstance(node_agent, InspectingAgent) and node_agent.inspector_batch is None
    log = tmp_path / "n1-pid77.log"
    _write(log, [render(pid=77, sn=1)])
    batch = node_agent.collect_once()
    assert batch is not None and len(batch.gpus) == 2
    assert node_agent.inspector_batch is not None and node_agent.inspector_batch.counters.records == 1
    with open(log, "a") as handle:
        handle.write(render(pid=77, sn=2) + "\n")
    second = node_agent.collect_once()
    assert second is not None and node_agent.inspector_batch.counters.records == 1  # only the new line
    assert node_agent.inspector_batch.timestamp == second.timestamp


def test_a_failing_inspector_costs_its_batch_not_the_gpus(tmp_path: Path) -> None:
    node_agent = agent.build_agent(_settings("--nccl-inspector.dir", str(tmp_path)), SimSource(node="n1", count=1))
    assert isinstance(node_agent, InspectingAgent) and node_agent.inspector is not None

    def broken(now: float) -> None:
        raise RuntimeError("disk on fire")

    node_agent.inspector.collect = broken  # type: ignore[method-assign,assignment]
    batch = node_agent.collect_once()
    assert batch is not None and len(batch.gpus) == 1
    assert node_agent.inspector_batch is None and node_agent.metrics.collector_errors._value.get() == 1


def test_the_pushed_batch_carries_the_running_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the sender gets, not only what the cycle returns: the push is what reaches the aggregator."""
    node_agent = agent.build_agent(_settings("--nccl-inspector.dir", str(tmp_path)), SimSource(node="n1", count=1))
    assert isinstance(node_agent, InspectingAgent) and node_agent.inspector is not None
    node_agent.inspector.job_of_pid = {77: "j1"}.get  # type: ignore[method-assign]
    submitted: list[NodeBatch] = []
    monkeypatch.setattr(node_agent.sender, "submit", submitted.append)
    _write(tmp_path / "n1-pid77.log", [render(pid=77, sn=1, comm_name="DP Group 0")])
    node_agent.collect_once()
    (pushed,) = submitted
    assert pushed.collectives is not None
    (row,) = pushed.collectives
    assert (row.job_id, row.group, row.collective, row.operations_total) == ("j1", "dp", "AllReduce", 1)
    assert pushed.body()["collectives"][0]["group"] == "dp"
