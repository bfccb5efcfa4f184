"""``/metrics`` for one fixed, rich snapshot is byte-for-byte the golden file: whole, sharded, and rendered again.

The snapshot has every resource the renderer knows (nodes and GPUs with health and InfiniBand ports, a training and
an inference job, pending and held scheduler jobs, an id only exporters know, waterfalls, baselines, quotas,
queue-wait histograms, durable counters, self-metrics), so any change to what a family renders, or to the order
families and series come in, shows here: a refactoring of the renderer must leave this file as it is. Two things
are not the renderer's to fix and are pinned by the test: the previous render's duration (set before each render)
and the installed version (``mfumon_build_info``, rewritten to ``VERSION``).

After an intended change of the exposition, regenerate with ``UPDATE_GOLDEN=1`` (not an ``MFUMON_`` variable: the
tests drop those) and review the diff.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from mfumon.api.accounting import Ledger
from mfumon.api.metrics import families
from mfumon.api.metrics.scrapes import ScrapeCache
from mfumon.api.metrics.self_metrics import SelfMetrics
from mfumon.api.metrics.store import MetricsRenderer
from mfumon.api.pricing import PriceList
from mfumon.api.regressions.analysis import AlsoChanged, Change
from mfumon.api.regressions.stats import Estimate
from mfumon.api.schemas.nodes import GpuSample, IbPortSample
from mfumon.api.server.guard import ConnectionGuard
from mfumon.api.state.aggregate import summarize
from mfumon.api.state.collective_ranks import nvlink_of
from mfumon.api.state.counters import DurableCounters
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.health import NodeHealth
from mfumon.api.state.outcome import InferenceOutcome, PhaseOutcome, ReportOutcome, ServingOutcome
from mfumon.api.state.profiles import combine
from mfumon.api.state.store import PoolHealthTotals, Snapshot
from mfumon.api.state.views import (
    BaselineView,
    CollectiveRankView,
    CollectiveView,
    HistogramView,
    JobView,
    NodeView,
    SourceView,
    build_node_view,
    gpu_views,
    port_views,
)
from mfumon.mfu._mfu import default_peak_table
from tests.utils.factories import ib_port

GOLDEN = Path(__file__).parent / "fixtures" / "exposition.golden.prom"
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
H100 = "NVIDIA H100 80GB HBM3"
RESOLVER = DeviceResolver(default_peak_table())
_BUILD_VERSION = re.compile(r'^(mfumon_build_info\{version=")[^"]*("\} 1)$', re.MULTILINE)

_HEALTH_COUNTERS = {
    "nvlink_crc_flit_errors_total": 3,
    "nvlink_crc_data_errors_total": 1,
    "nvlink_replay_errors_total": 7,
    "nvlink_recovery_errors_total": 0,
    "pcie_replays_total": 2,
    "remapped_rows_correctable_total": 4,
    "remapped_rows_uncorrectable_total": 1,
    "row_remap_pending": 1,
    "row_remap_failure": 0,
    "energy_joules_total": 123456789.5,
    "last_xid": 79,
}

# Issue 53: tensor activity from DCGM 4.6+ cycle counters (the estimate's source), by precision, PCIe link, fabric.
_DCGM_46_COUNTERS = {
    "tensor_active_exact": 1,
    "hmma_active": 0.5,
    "imma_active": 0.0,
    "dmma_active": 0.0625,
    "pcie_link_gen": 4,
    "pcie_link_gen_max": 5,
    "pcie_link_width": 16,
    "pcie_link_width_max": 16,
    "fabric_health_summary": 1,
    "fabric_health_mask": 0,
    "fabric_manager_status": 3,
}


def _gpu(uuid: str, index: int, job_id: str | None, **counters: object) -> GpuSample:
    return GpuSample.model_validate({"uuid": uuid, "index": index, "name": H100, "job_id": job_id, **counters})


def _busy(**overrides: object) -> dict[str, object]:
    counters: dict[str, object] = {
        "utilization": 0.97,
        "sm_active": 0.81,
        "sm_occupancy": 0.42,
        "tensor_active": 0.55,
        "dram_active": 0.33,
        "memory_used_bytes": 61_234_567_890,
        "memory_total_bytes": 85_899_345_920,
        "power_watts": 612.25,
        "temperature_celsius": 63.0,
        "sm_clock_hz": 1.755e9,
        "max_sm_clock_hz": 1.98e9,
        "nvlink_tx_bytes_per_second": 1.25e11,
        "nvlink_rx_bytes_per_second": 1.5e11,
        "pcie_tx_bytes_per_second": 2.5e9,
        "pcie_rx_bytes_per_second": 3.25e9,
        "xid_errors_total": 0,
        "ecc_uncorrected_total": 0,
        "ecc_corrected_total": 12,
        "compute_processes": 1,
    }
    counters.update(overrides)
    return counters


def _node(
    name: str,
    pool: str | None,
    gpus: list[GpuSample],
    *,
    ports: list[dict[str, object]] | None = None,
    health: NodeHealth | None = None,
    seen: float = NOW - 4.5,
) -> NodeView:
    view = build_node_view(
        name=name,
        pool=pool,
        last_seen_at=seen,
        last_sample_timestamp=seen - 0.25,
        samples_received=42,
        updated_at=seen,
        gpus=gpu_views(name, seen - 0.25, gpus, RESOLVER),
        ib_ports=port_views([IbPortSample.model_validate(p) for p in ports] if ports is not None else None),
    )
    view.health = health
    return view


def _nodes(a1_seen: float = NOW - 4.5, a1_watts: float = 612.25) -> tuple[NodeView, ...]:
    """Four nodes; gpu-a1 pushed at ``a1_seen`` with its first GPU drawing ``a1_watts``."""
    uuid = "GPU-a1-{}".format
    train = [
        _gpu(
            uuid(0),
            0,
            "train-1",
            **_busy(throttle_reasons=["hw_thermal", "sw_power_cap"], power_watts=a1_watts),
            **_HEALTH_COUNTERS,
            **_DCGM_46_COUNTERS,
        ),
        _gpu(uuid(1), 1, "train-1", **_busy(tensor_active=0.31, xid_errors_total=2)),
        _gpu(uuid(2), 2, "train-1", **_busy(tensor_active=0.6, throttle_reasons=[])),
        _gpu(uuid(3), 3, None, utilization=0.0, compute_processes=0, power_watts=71.5, energy_joules_total=9.75e6),
    ]
    checks = {
        uuid(0): {"responsive": True, "ecc_uncorrectable": True, "row_remap_pending": False, "thermal": False},
        uuid(1): {"responsive": True, "ecc_uncorrectable": True, "row_remap_pending": True, "thermal": True},
        uuid(3): {"responsive": True},
    }
    reasons = (
        {"check": "row_remap_pending", "drain": True, "meaning": "a row remap waits", "gpu": uuid(0)},
        {"check": "thermal", "drain": False, "meaning": "clocks held down", "gpu": uuid(0)},
        {"check": "ib_ports_active", "drain": True, "meaning": "a port is not ACTIVE"},
    )
    degraded_health = NodeHealth(
        gpu_checks=checks,
        node_checks={"ib_ports_active": False, "ib_link_flapping": True, "ib_errors": True},
        reasons=reasons,
    )
    a1 = _node(
        "gpu-a1",
        "train",
        train,
        ports=[ib_port("mlx5_0", 1), ib_port("mlx5_1", 1, state="DOWN", link_downed_total=3, symbol_errors_total=9)],
        health=degraded_health,
        seen=a1_seen,
    )
    # NCCL Inspector (issue 61): train-1's data-parallel AllReduce and tensor-parallel AllGather; old-9 is gone.
    a1.collectives = (
        CollectiveView("train-1", "dp", "AllReduce", 3, 24, 1_200, 84.5, 1.2e12, 2.1e12, 4, 3.0, 7.5e10, 10.0),
        CollectiveView("train-1", "tp", "AllGather", 3, 8, 9_000, 12.25, 3.0e11, 2.625e11, 0, 0.5, 1.3e10, 10.0),
        CollectiveView("old-9", "0x7f8c496ae9f661", "AllReduce", 1, 8, 10, 1.0, 1e9, 1.75e9, 0, 0.0, 0.0, 10.0),
    )
    # ... per rank: rank 2 of the dp communicator arrives late (its kernel a third of the others'), and a pipeline
    # Send/Recv between two of its GPUs runs at 40 GB/s against NVLink's 450 one way.
    dp, pp = "0xd1", "0xe2"
    a1.collective_ranks = (
        CollectiveRankView("train-1", "dp", dp, "AllReduce", 0, 24, None, 50, 1.5, 1e11, 1.75e11, 10.0),
        CollectiveRankView("train-1", "dp", dp, "AllReduce", 1, 24, None, 50, 1.5, 1e11, 1.75e11, 10.0),
        CollectiveRankView("train-1", "dp", dp, "AllReduce", 2, 24, None, 50, 0.5, 1e11, 1.75e11, 10.0),
        CollectiveRankView("train-1", "pp", pp, "Send", 0, 2, 1, 20, 0.8, 3.2e10, 3.2e10, 10.0),
        CollectiveRankView("train-1", "pp", pp, "Recv", 1, 2, 0, 20, 0.8, 3.2e10, 3.2e10, 10.0),
    )
    b2 = _node(
        "gpu-b2",
        "infer",
        [
            _gpu("GPU-b2-0", 0, "serve-1", **_busy(tensor_active=0.21)),
            _gpu("GPU-b2-1", 1, "serve-1", **_busy(tensor_active=0.24, sm_active=0.5)),
            GpuSample.model_validate({"uuid": "GPU-b2-2", "index": 2, "name": H100, "up": False}),
            _gpu("GPU-b2-3", 3, "ghost-7", **_busy(tensor_active=0.4)),
            _gpu("GPU-b2-4", 4, None, **_busy(tensor_active=0.1)),
            # Shared by two jobs (issue 35), with AMD's deferred-error count beside the whole-GPU counters.
            _gpu(
                "GPU-b2-5",
                5,
                "serve-1",
                **_busy(tensor_active=0.3, compute_processes=2, ecc_deferred_total=1),
                shares=[
                    {"job_id": "serve-1", "share": 0.625, "method": "process_utilization"},
                    {"job_id": "ghost-7", "share": 0.375, "method": "process_utilization"},
                ],
            ),
        ],
        ports=[],
        health=NodeHealth(
            gpu_checks={f"GPU-b2-{i}": {"responsive": True, "xid": True} for i in (0, 1, 3, 4)},
            node_checks={},
            reasons=(),
        ),
    )
    c3 = _node(
        "gpu-c3",
        None,
        [
            GpuSample.model_validate(
                {"uuid": "MIG-c3-0", "index": 0, "name": "Mystery GPU", "mig_profile": "3g.40gb", "job_id": "train-1"}
                | _busy(tensor_active=0.5, power_watts=None)
            )
        ],
    )
    d4 = _node(
        "gpu-d4", "train", [_gpu(f"GPU-d4-{i}", i, None, utilization=0.0, compute_processes=0) for i in range(4)]
    )
    return (a1, b2, c3, d4)


def _ledger() -> dict[str, object]:
    ledger = Ledger(
        gpu_seconds={"init": 480.0, "checkpoint": 120.5, "stalled": 33.25, "data_wait": 60.0, "compute": 14_400.0},
        model_flops=4.2e21,
        peak_flops=1.1e22,
        compute_peak_flops=9.5e21,
        recent_step_seconds=[1.02, 0.98, 1.1, 1.0],
    )
    return ledger.to_json()


def _job(job_id: str, status: str, kind: str = "training", **fields: object) -> JobView:
    values: dict[str, object] = {
        "job_id": job_id,
        "status": status,
        "kind": kind,
        "name": None,
        "team": None,
        "pool": None,
        "gpu_model": None,
        "dtype": "bf16",
        "num_gpus": None,
        "gpus_requested": None,
        "model_key": None,
        "created_at": NOW - 7200.0,
        "started_at": None,
        "last_report_at": None,
        "ended_at": None,
        "latest": None,
        "updated_at": NOW - 30.0,
    }
    values.update(fields)
    return JobView(**values)  # type: ignore[arg-type]


def _jobs() -> tuple[JobView, ...]:
    training = ReportOutcome(
        tokens_per_second=250_000.0,
        mfu=0.4125,
        hfu=0.5,
        flops_per_token=4.1e10,
        model_flops_per_second=1.02e16,
        peak_flops_per_second=2.47e16,
        peak_flops_per_gpu=989e12,
        device="h100-sxm",
        num_gpus=8,
        step_seconds=1.0125,
        comm_ratio=0.085,
        data_wait_ratio=0.0125,
        step=1200,
        signature="sig-train",
    )
    inference = ReportOutcome(
        tokens_per_second=5_400.0,
        mfu=0.07,
        model_flops_per_second=1.4e14,
        peak_flops_per_second=1.978e15,
        peak_flops_per_gpu=989e12,
        num_gpus=2,
        signature="sig-serve",
        inference=InferenceOutcome(
            phases={
                "prefill": PhaseOutcome(tokens_per_second=4_000.0, mfu=0.05, active_mfu=0.62),
                "decode": PhaseOutcome(tokens_per_second=1_400.0, mfu=0.02, active_mfu=None),
            },
            mbu=0.58,
            engine_mfu=0.06,
            memory_bytes_per_second=3.9e12,
            peak_memory_bytes_per_second=6.7e12,
            decode_step_weight_bytes=1.4e10,
            decode_step_kv_cache_bytes=2.5e9,
            batch_size=24.5,
            context_tokens=1834.0,
        ),
        requests_running=24.0,
        requests_waiting=3.0,
        kv_cache_usage=0.415,
        serving=ServingOutcome.from_json(
            {
                "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.1, "objective_ratio": 0.9},
                "slo_goodput": {"ratio": 0.8125, "upper_ratio": 0.875, "requests_per_second": 3.25},
                "latency": {"ttft_p50": 0.375, "ttft_p90": 0.875, "tpot_p90": 0.0625, "itl_p99": 0.125},
                "requests_per_second": 4.0,
                "preemptions_per_second": 0.5,
            }
        ),
    )
    serving_ledger = Ledger(
        gpu_seconds={"init": 60.0, "stalled": 20.0, "compute": 1_120.0},
        serving_gpu_seconds={"idle": 20.0, "prefill": 120.0, "decode": 960.0, "recompute": 40.0},
    ).to_json()
    return (
        _job(
            "train-1",
            "running",
            name="llama 70b",
            team="ml",
            pool="train",
            gpu_model=H100,
            num_gpus=8,
            gpus_requested=8,
            model_key="llama-70b",
            started_at=NOW - 3600.0,
            last_report_at=NOW - 12.0,
            latest=training,
            restarts=2,
            failures=1,
            accounting=_ledger(),
            profile=combine(
                7,
                NOW - 900.0,
                [
                    {
                        "rank": 0,
                        "span_seconds": 2.0,
                        "compute_seconds": 1.5,
                        "comm_seconds": 0.5,
                        "exposed_comm_seconds": 0.25,
                        "idle_seconds": 0.125,
                        "tensor_core_ratio": 0.75,
                        "groups": [
                            {"group": "tp", "comm_seconds": 0.375, "exposed_seconds": 0.125},
                            {"group": "dp", "comm_seconds": 0.125, "exposed_seconds": 0.125},
                        ],
                    }
                ],
            ),
        ),
        _job(
            "serve-1",
            "running",
            "inference",
            team='ml "core"\\x',
            pool="infer",
            dtype="fp8",
            num_gpus=2,
            started_at=NOW - 600.0,
            last_report_at=NOW - 5.0,
            latest=inference,
            accounting=serving_ledger,
        ),
        _job("pending-1", "pending", pool="infer", team="research", gpus_requested=4, restarts=0),
        _job(
            "wait-1",
            "pending",
            team="ml",
            pool="train",
            gpus_requested=16,
            source="slurm-a",
            queued_at=NOW - 1234.5,
            request_units=((8, 2),),
        ),
        _job(
            "wait-2",
            "pending",
            team="research",
            pool="train",
            gpus_requested=3,
            source="slurm-a",
            queued_at=NOW - 60.0,
            request_units=((3, 1),),
        ),
        _job("held-1", "pending", team="ml", pool="train", gpus_requested=2, source="slurm-a"),
        _job(
            "slurm-run",
            "running",
            team="research",
            pool="train",
            gpus_requested=2,
            source="slurm-a",
            started_at=NOW - 900.0,
            gpus_scheduled=2,
            placement={"gpu-d4": 2},
        ),
    )


def _counters() -> DurableCounters:
    counters = DurableCounters()
    rows: list[tuple[str, str, int, float]] = [
        ("mfumon_job_ends_total", '{kind="training",outcome="success"}', 0, 12.0),
        ("mfumon_job_ends_total", '{kind="training",outcome="success"}', 1, 3.0),
        ("mfumon_job_ends_total", '{kind="inference",outcome="expired"}', 0, 1.0),
        ("mfumon_job_events_total", '{kind="training",type="restart"}', 0, 4.0),
        ("mfumon_cluster_gpu_seconds_total", '{category="compute"}', 0, 86_400.5),
        ("mfumon_cluster_gpu_seconds_total", '{category="idle"}', 2, 7_200.0),
        ("mfumon_pool_gpu_seconds_total", '{pool="train",category="compute"}', 0, 50_000.0),
        ("mfumon_pool_gpu_seconds_total", '{pool="infer",category="unreported"}', 0, 900.0),
        ("mfumon_team_gpu_seconds_total", '{team="ml",category="init"}', 0, 480.0),
        # Busy without reports: ghost-7 (exporters only) and node gpu-a1 are visible; old-9 and node z9 are gone.
        ("mfumon_job_unreported_seconds_total", '{job_id="ghost-7",kind=""}', 0, 1_800.0),
        ("mfumon_job_unreported_gpu_seconds_total", '{job_id="ghost-7",kind=""}', 0, 675.0),
        ("mfumon_job_unreported_seconds_total", '{job_id="old-9",kind="training"}', 0, 60.0),
        ("mfumon_node_unattributed_busy_seconds_total", '{node="gpu-a1"}', 0, 45.0),
        ("mfumon_node_unattributed_busy_gpu_seconds_total", '{node="gpu-a1"}', 0, 90.0),
        ("mfumon_node_unattributed_busy_gpu_seconds_total", '{node="z9"}', 0, 30.0),
        ("mfumon_remediation_actions_total", '{action="drain",reason="xid",outcome="done"}', 3, 2.0),
        ("mfumon_remediation_actions_total", '{action="drain",reason="budget_pool",outcome="withheld"}', 5, 40.0),
        ("mfumon_remediation_gpu_seconds_total", '{category="drained"}', 3, 57_600.0),
        ("mfumon_remediation_gpu_seconds_total", '{category="lost_before_drain"}', 3, 3_600.0),
        ("mfumon_node_remediation_decisions_total", '{node="n1",action="drain",reason="xid",outcome="done"}', 3, 1.0),
        (
            "mfumon_node_remediation_decisions_total",
            '{node="n2",action="drain",reason="budget_pool",outcome="withheld"}',
            5,
            40.0,
        ),
    ]
    # Energy and cost (issue 60): serve-1 is visible, old-9 ended (its series are gone); every category shows.
    for job in ('{job_id="serve-1",kind="inference"}', '{job_id="old-9",kind="training"}'):
        rows += [
            ("mfumon_job_energy_joules_total", job, 0, 2_520_000.0),
            ("mfumon_job_energy_estimated_joules_total", job, 0, 1_000.0),
            ("mfumon_job_charged_gpu_seconds_total", job, 0, 7_200.0),  # the chargeback's: not exported
            ("mfumon_job_cost_total", job, 0, 5.25),
            ("mfumon_job_unpriced_gpu_seconds_total", job, 0, 60.0),
            ("mfumon_job_tokens_total", job, 0, 4_200_000.0),
            ("mfumon_job_requests_total", job, 0, 1_300.0),
        ]
    rows += [
        ("mfumon_cluster_cost_total", '{category="compute"}', 0, 60.0),
        ("mfumon_cluster_cost_total", '{category="idle_energy"}', 0, 0.5),
        ("mfumon_pool_cost_total", '{pool="train",category="compute"}', 0, 35.0),
        ("mfumon_team_cost_total", '{team="ml",category="energy"}', 0, 1.5),
        ("mfumon_cluster_unpriced_gpu_seconds_total", '{category="idle"}', 0, 3_600.0),
        ("mfumon_pool_unpriced_gpu_seconds_total", '{pool="infer",category="unreported"}', 0, 900.0),
        ("mfumon_team_unpriced_gpu_seconds_total", '{team="ml",category="init"}', 0, 480.0),
        ("mfumon_cluster_energy_joules_total", '{category="job"}', 0, 9_000_000.0),
        ("mfumon_pool_energy_joules_total", '{pool="train",category="idle"}', 0, 700_000.0),
        ("mfumon_team_energy_joules_total", '{team="ml",category="job"}', 0, 2_520_000.0),
        ("mfumon_cluster_tokens_total", "", 0, 8.0e9),
        ("mfumon_pool_tokens_total", '{pool="train"}', 0, 6.0e9),
        ("mfumon_team_tokens_total", '{team="ml"}', 0, 4.2e6),
    ]
    for scope, labels in (("cluster", ""), ("pool", '{pool="train"}'), ("team", '{team="ml"}')):
        rows += [
            (f"mfumon_{scope}_model_flops_total", labels, 0, 4.2e21),
            (f"mfumon_{scope}_peak_flops_total", labels, 0, 1.1e22),
            (f"mfumon_{scope}_compute_peak_flops_total", labels, 0, 9.5e21),
        ]
    counters.apply(rows)
    return counters


def _snapshot() -> Snapshot:
    return Snapshot(
        now=NOW,
        nodes=_nodes(),
        jobs=_jobs(),
        baselines={"sig-train": BaselineView("sig-train", 0.43, NOW - 86_400.0, pinned=True)},
        pool_health={
            "infer": PoolHealthTotals(idle_energy_joules=0.0, idle_gpu_seconds=0.0, gpu_faults=0),
            "train": PoolHealthTotals(idle_energy_joules=1_234_567.25, idle_gpu_seconds=3_600.5, gpu_faults=2),
        },
        counters=_counters(),
        sources=(
            SourceView(
                name="slurm-a",
                kind="slurm",
                observed_at=NOW - 20.0,
                synced_at=NOW - 19.5,
                quotas=(("ml", "train", 32), ("ml", None, 64), ("research", "train", 4)),
                updated_at=NOW - 19.5,
            ),
        ),
        queue_waits=(
            HistogramView("train", "ml", (1, 2, 3, 0, 0, 1, 0, 0, 0, 0, 0, 1), 95_000.0, 8, NOW - 100.0),
            HistogramView("infer", "research", (4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 88.5, 4, NOW - 100.0),
        ),
        regressions=_regressions(),
        prices=PriceList(currency="EUR", devices={"h100-sxm": 2.5}, kwh=0.2, pue=1.2, set_at=NOW - 86_400.0),
    )


def _regressions() -> tuple[Change, ...]:
    """Issue 59: an NCCL upgrade that cost a signature 6 %, confounded with PyTorch; a driver change that did nothing
    (not a series)."""
    sig = "training|llama3-8b|h100-sxm|8|bf16"
    nccl = Change(
        sig,
        "nccl",
        "2.21.5",
        "2.23.4",
        "regression",
        ("a", "b", "c"),
        ("d", "e", "f", "g"),
        128.0,
        Estimate(0.40, 0.39, 0.41, 0.004, 3),
        Estimate(0.376, 0.37, 0.382, 0.003, 4),
        -0.06,
        0.0001,
        also_changed=(AlsoChanged("pytorch", "2.5.1", "2.6.0"),),
        affected_jobs=("d", "e", "f", "g"),
    )
    driver = Change(sig, "driver", "550.54.15", "560.35.03", "no_change", ("a", "b", "c"), ("d", "e", "f"), 96.0)
    return (nccl, driver)


def _self_metrics() -> SelfMetrics:
    metrics = SelfMetrics()
    for endpoint, outcome, times in (("nodes", "ok", 3), ("jobs", "ok", 2), ("jobs", "rejected", 1)):
        for _ in range(times):
            metrics.count_ingest(endpoint, outcome)
    metrics.count_gpu_samples(14)
    metrics.count_unknown_device("Mystery GPU")
    metrics.count_token_write("exporter-a", "nodes", "ok")
    metrics.count_token_write("trainer", "jobs", "rejected")
    metrics.count_refused("nodes")
    metrics.count_read_rejected("metrics")
    metrics.count_body_timeout()
    guard = ConnectionGuard(header_timeout_seconds=10.0, write_timeout_seconds=10.0, max_connections=64)
    guard.open = 5
    guard.count("evicted")
    metrics.connections = guard
    scrapes = ScrapeCache(max_age_seconds=1.0)
    scrapes.rendered, scrapes.reused = 6, 2
    metrics.scrapes = scrapes
    return metrics


def _expositions() -> str:
    """Every render the test checks, in order, each after a ``# ---`` line naming it."""
    snapshot = _snapshot()
    summary = summarize(snapshot)
    self_metrics = _self_metrics()
    renderer = MetricsRenderer(
        self_metrics,
        refresh_stats=lambda: (0.0125, 2),
        flush_stats=lambda: (3, 1.5, 0.0425, 1),
        baseline_of={"sig-train": 0.43}.get,
        nvlink_of=nvlink_of(default_peak_table()),
    )
    renderer.prepare_node(snapshot.nodes[0])  # rendered ahead of the scrape, as after a push
    renderer.prepare_job(snapshot.jobs[0])
    # gpu-a1 pushes again (one GPU's power changed: the others' lines are reused) and pending-1 ends (forgotten).
    pushed = _nodes(a1_seen=NOW + 5.5, a1_watts=598.5)[0]
    later = replace(
        snapshot,
        nodes=(pushed, *snapshot.nodes[1:]),
        jobs=tuple(j for j in snapshot.jobs if j.job_id != "pending-1"),
    )
    sections: list[str] = []
    for name, seen, shard in (
        ("whole", snapshot, None),
        ("shard 0/3", snapshot, (0, 3)),
        ("shard 1/3", snapshot, (1, 3)),
        ("shard 2/3", snapshot, (2, 3)),
        ("whole, again", snapshot, None),
        ("whole, after a push and an end", later, None),
    ):
        self_metrics.last_scrape_duration_seconds = 0.015625  # the previous render's, were it timed
        body = renderer.render(seen, summarize(seen) if seen is later else summary, shard).decode()
        sections.append(f"# --- {name}\n{body}")
    return _BUILD_VERSION.sub(r"\g<1>VERSION\g<2>", "".join(sections))


def test_the_exposition_is_the_golden_file() -> None:
    text = _expositions()
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
        pytest.skip(f"wrote {GOLDEN}")
    assert text == GOLDEN.read_text()


def test_the_golden_file_has_a_series_of_every_family() -> None:
    """Every family declared has a sample in the golden text: the snapshot exercises them all."""
    declared = {
        family.name: family
        for value in vars(families).values()
        if isinstance(value, dict)
        for family in value.values()
        if isinstance(family, families.Family)
    }
    assert len(declared) > 100
    text = GOLDEN.read_text()
    sampled = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}
    missing = [
        name
        for name, family in declared.items()
        if (f"{name}_bucket" if family.type == "histogram" else name) not in sampled
    ]
    assert missing == []
    assert all(f"# HELP {name} " in text for name in declared)
