"""The trace summariser on real Kineto traces, against Holistic Trace Analysis' figures (fixtures/README.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from mfumon.exporter.job.profile import group_of, load_trace, summarize_trace

FIXTURES = Path(__file__).parent / "fixtures"

# HTA 0.5.0 on each trace (fixtures/README.md), microseconds: overlap %, span, compute, idle, comm, exposed comm.
HTA = {
    "hta_nccl_parser_config_rank0.json.gz": (14.31, 435586, 75169, 338781, 24278, 20805),
    "hta_trace_filter_sampled_rank0.json.gz": (11.81, 600058, 106252, 321378, 195327, 172259),
    "hta_trace_filter_sampled_rank1.json.gz": (20.05, 600674, 135548, 328671, 168027, 134336),
}


def _hta_scope(trace: dict[str, Any]) -> dict[str, Any]:
    """What HTA analyses: device work launched before the last ProfilerStep began, ns timestamps rounded inwards."""
    events = trace["traceEvents"]
    last_step = max(
        e["ts"] for e in events if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
    )
    launched = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kept = []
    for event in events:
        if event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            at = launched.get(event.get("args", {}).get("correlation"))
            if at is None or at >= last_step:
                continue
            start, end = math.ceil(event["ts"]), math.floor(event["ts"] + event["dur"])
            event = {**event, "ts": start, "dur": end - start}
        kept.append(event)
    return {**trace, "traceEvents": kept}


@pytest.mark.parametrize("name", sorted(HTA))
def test_summary_matches_hta(name: str) -> None:
    overlap_pct, span, compute, idle, comm, exposed = HTA[name]
    summary = summarize_trace(_hta_scope(load_trace(FIXTURES / name)))
    assert summary.span_seconds * 1e6 == pytest.approx(span, abs=1)
    assert summary.compute_seconds * 1e6 == pytest.approx(compute, abs=1)
    assert summary.idle_seconds * 1e6 == pytest.approx(idle, abs=1)
    assert summary.comm_seconds * 1e6 == pytest.approx(comm, abs=1)
    assert summary.exposed_comm_seconds * 1e6 == pytest.approx(exposed, abs=1)
    assert 100 * (1 - summary.exposed_comm_seconds / summary.comm_seconds) == pytest.approx(overlap_pct, abs=0.01)


def test_collectives_and_groups_of_a_trace_with_process_groups() -> None:
    trace = load_trace(FIXTURES / "hta_nccl_parser_config_rank0.json.gz")
    summary = summarize_trace(trace)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    by_collective = {c.collective: c for c in summary.collectives}
    assert set(by_collective) == {"allreduce", "broadcast"}
    assert by_collective["allreduce"].count == sum(e["args"]["Collective name"] == "allreduce" for e in kernels)
    assert by_collective["broadcast"].count == sum(e["args"]["Collective name"] == "broadcast" for e in kernels)
    allreduce_us = sum(e["dur"] for e in kernels if e["args"]["Collective name"] == "allreduce")
    assert by_collective["allreduce"].comm_seconds * 1e6 == pytest.approx(allreduce_us, rel=1e-6)  # one stream
    # "default_pg" names no parallelism: all of it is "other", and the group adds up to the whole.
    assert [g.group for g in summary.groups] == ["other"]
    assert summary.groups[0].exposed_seconds == pytest.approx(summary.exposed_comm_seconds)
    assert [s.step for s in summary.steps] == [4, 5, 6]
    assert 0.0 < summary.tensor_core_ratio < 1.0  # type: ignore[operator]


def test_overrides_name_a_group() -> None:
    trace = load_trace(FIXTURES / "hta_nccl_parser_config_rank0.json.gz")
    summary = summarize_trace(trace, group_overrides={"0": "dp"})
    assert [g.group for g in summary.groups] == ["dp"]


@pytest.mark.parametrize(
    ("description", "group"),
    [
        ("mesh_tp", "tp"),
        ("TENSOR_MODEL_PARALLEL_GROUP", "tp"),
        ("PIPELINE_MODEL_PARALLEL_GROUP", "pp"),
        ("DATA_PARALLEL_GROUP_WITH_CP", "dp"),
        ("mesh_dp_shard", "dp"),
        ("EXPERT_MODEL_PARALLEL_GROUP", "ep"),
        ("CONTEXT_PARALLEL_GROUP", "cp"),
        ("default_pg", "other"),
        (None, "other"),
    ],
)
def test_group_names(description: str | None, group: str) -> None:
    assert group_of(description) == group


def _kernel(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


def test_exposed_comm_split_by_group_by_hand() -> None:
    """A compute kernel 0-100 µs, a TP all-gather 50-150 (50 exposed), an EP all-to-all 200-260 (all exposed)."""
    trace = {
        "traceEvents": [
            _kernel("sm90_xmma_gemm_bf16", 0, 100),
            _kernel("ncclDevKernel_AllGather_RING_LL", 50, 100, **{"Process Group Description": "mesh_tp"}),
            _kernel("ncclDevKernel_AllToAll", 200, 60, **{"Process Group Description": "mesh_ep"}),
        ]
    }
    summary = summarize_trace(trace)
    assert summary.span_seconds == pytest.approx(260e-6)
    assert summary.idle_seconds == pytest.approx(50e-6)  # 150-200
    assert summary.exposed_comm_seconds == pytest.approx(110e-6)
    assert summary.group("tp").exposed_seconds == pytest.approx(50e-6)  # type: ignore[union-attr]
    assert summary.group("ep").comm_seconds == pytest.approx(60e-6)  # type: ignore[union-attr]
    assert {c.collective for c in summary.collectives} == {"allgather", "all_to_all"}
    assert summary.tensor_core_ratio == 1.0


def test_an_empty_trace_summarises_to_zeros() -> None:
    summary = summarize_trace({"traceEvents": []})
    assert summary.span_seconds == 0.0 and summary.groups == () and summary.tensor_core_ratio is None


def test_a_trace_without_device_work_is_read_on_the_host() -> None:
    """A CPU job: the step thread's operators are compute, gloo's collective (on its own thread) communication."""
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "tid": 1, "ts": 0, "dur": 100},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": 0, "dur": 40},
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "tid": 1, "ts": 40, "dur": 5},
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "tid": 9, "ts": 30, "dur": 50},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "tid": 9, "ts": 90, "dur": 10},  # not the step thread
        ]
    }
    summary = summarize_trace(trace)
    assert summary.compute_seconds == pytest.approx(40e-6) and summary.comm_seconds == pytest.approx(50e-6)
    assert summary.exposed_comm_seconds == pytest.approx(40e-6)  # 40-80: no operator of the step thread runs
    assert summary.span_seconds == pytest.approx(80e-6) and summary.idle_seconds == 0.0
    assert [(c.collective, c.count) for c in summary.collectives] == [("allreduce", 1)]
