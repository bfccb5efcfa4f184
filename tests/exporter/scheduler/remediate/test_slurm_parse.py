"""``sinfo --json`` into scheduler nodes across Slurm's shapes, and the reason the loop writes."""

from __future__ import annotations

from mfumon.exporter.scheduler.remediate.model import Decision, SchedulerNode
from mfumon.exporter.scheduler.remediate.slurm import parse_sinfo, slurm_reason


def test_22_05_and_newer_shapes_and_whose_drain_it_is() -> None:
    document = {
        "nodes": [
            # 22.05 (openapi v0.0.38): state a string, flags beside it
            {"name": "g1", "state": "idle", "state_flags": ["DRAIN"], "partitions": ["train"], "reason": "mfumon: xid"},
            {"name": "g2", "state": "mixed", "state_flags": [], "partitions": ["train", "infer"], "reason": ""},
            # 23.02+: one list holding the base state and its flags
            {"name": "g3", "state": ["IDLE", "DRAIN"], "partitions": ["infer"], "reason": "bad fan -- alice"},
            {"name": "g4", "state": ["DOWN", "NOT_RESPONDING"], "partitions": ["infer"], "reason": "Not responding"},
            {"name": "g2", "state": "mixed", "partitions": ["infer", "train"]},  # listed twice: once
        ]
    }
    assert parse_sinfo(document) == [
        SchedulerNode("g1", pools=("train",), drained=True, ours=True, reason="mfumon: xid"),
        SchedulerNode("g2", pools=("infer", "train"), drained=False, ours=False, reason=None),
        SchedulerNode("g3", pools=("infer",), drained=True, ours=False, reason="bad fan -- alice"),
        SchedulerNode("g4", pools=("infer",), drained=True, ours=False, reason="Not responding"),
    ]


def test_a_resumed_node_keeping_an_old_reason_of_ours_is_not_drained() -> None:
    document = {"nodes": [{"name": "g1", "state": ["IDLE"], "partitions": ["train"], "reason": "mfumon: xid"}]}
    assert parse_sinfo(document) == [SchedulerNode("g1", ("train",), drained=False, ours=False, reason="mfumon: xid")]


def test_reason_names_checks_and_gpus() -> None:
    decision = Decision("g1", "drain", "responsive,xid", checks=("responsive", "xid"), gpus=(3, 5))
    assert slurm_reason(decision) == "mfumon: responsive,xid (GPU 3,5)"
    assert slurm_reason(Decision("g1", "drain", "ib_link_flapping")) == "mfumon: ib_link_flapping"
