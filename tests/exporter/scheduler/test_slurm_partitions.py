"""Slurm partitions as pools (issue 31 #5): ``sinfo --json`` of a real Slurm 22.05 with overlapping partitions.

The capture (``fixtures/slurm/sinfo-22.05-partitions.json``): ``train`` over gpu-node-1, ``infer`` over gpu-node-1
and gpu-node-2 (configured, never started), hidden ``debug`` over gpu-node-2, and ``empty`` without nodes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mfumon.exporter.scheduler import cli, slurm
from mfumon.exporter.scheduler.model import Pool
from mfumon.exporter.scheduler.slurm_partitions import parse_partitions

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
SINFO = FIXTURES / "sinfo-22.05-partitions.json"
SQUEUE = FIXTURES / "squeue-22.05-queue.json"


def test_overlapping_partitions_of_real_sinfo_each_list_their_nodes() -> None:
    pools = parse_partitions(json.loads(SINFO.read_text()))
    assert pools == [
        Pool("debug", ("gpu-node-2",)),  # hidden partitions are listed too
        Pool("infer", ("gpu-node-1", "gpu-node-2")),
        Pool("train", ("gpu-node-1",)),
    ]  # "empty" has no node: no pool


def test_newer_sinfo_shapes_read_the_same() -> None:
    # data_parser v0.0.40+ (23.11 to 24.11): state a list, numbers as objects; partitions stay a list of names.
    document = {
        "nodes": [
            {"name": "gpu-node-1", "state": ["IDLE"], "partitions": ["train", "infer"], "cpus": {"set": True}},
            {"name": "gpu-node-2", "state": ["DOWN", "NOT_RESPONDING"], "partitions": ["infer"]},
            {"name": "", "partitions": ["ghost"]},
            {"name": "cpu-1", "partitions": []},
        ]
    }
    assert parse_partitions(document) == [Pool("infer", ("gpu-node-1", "gpu-node-2")), Pool("train", ("gpu-node-1",))]


def test_the_snapshot_carries_the_partitions_read_with_the_queue() -> None:
    snap = slurm.snapshot(("cat", str(SQUEUE)), sinfo=("cat", str(SINFO)))
    body = snap.as_json()
    assert body["pools"] == [
        {"name": "debug", "nodes": ["gpu-node-2"]},
        {"name": "infer", "nodes": ["gpu-node-1", "gpu-node-2"]},
        {"name": "train", "nodes": ["gpu-node-1"]},
    ]
    assert {job["pool"] for job in body["jobs"]} == {"train", "infer"}  # the jobs' partitions are pools
    assert "pools" not in slurm.snapshot(("cat", str(SQUEUE)), sinfo=None).as_json()  # --pools exporters


def test_a_failing_sinfo_fails_the_whole_read(tmp_path: Path) -> None:
    # A sync without pools would hand them back to exporters for a round: nothing is sent instead.
    with pytest.raises(slurm.SlurmError):
        slurm.snapshot(("cat", str(SQUEUE)), sinfo=("false",))


def test_the_command_line_dry_run_prints_the_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, fixture in (("squeue", SQUEUE), ("sinfo", SINFO)):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\nexec cat {fixture}\n")
        script.chmod(0o755)
    args = ["--source", "slurm", "--slurm.squeue", str(tmp_path / "squeue"), "--slurm.sinfo", str(tmp_path / "sinfo")]
    assert cli.main([*args, "--dry-run"]) == 0
    assert [p["name"] for p in json.loads(capsys.readouterr().out)["pools"]] == ["debug", "infer", "train"]
    assert cli.main([*args, "--dry-run", "--pools", "exporters"]) == 0
    assert "pools" not in json.loads(capsys.readouterr().out)
