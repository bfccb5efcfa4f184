"""Property: over random cluster snapshots, every GPU exporters report is in exactly one state.

Checked in the summary, per pool, per node, in ``/metrics`` as rendered, and against a direct per-GPU count;
unverified GPUs never leak into a state, and no pool exists without a node. Some GPUs are shared by several jobs
(issue 35): such a GPU is still in one state, and its jobs' shares of it add up to 1 in every job's account.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mfumon.api.metrics.self_metrics import SelfMetrics
from mfumon.api.metrics.store import MetricsRenderer
from mfumon.api.pricing import NO_PRICES
from mfumon.api.schemas.nodes import GpuJobShare, GpuSample
from mfumon.api.services.fleet_billing import state_counts, state_prices
from mfumon.api.state.aggregate import (
    STATES,
    gpu_state,
    node_gpu_states,
    reporting_jobs,
    summarize,
)
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import GpuView, JobView, NodeView, build_node_view, gpu_views
from mfumon.mfu import PeakTable
from tests.utils.factories import metric_samples

JOB_IDS = ("j0", "j1", "j2", "j3", "j4")
POOLS = (None, "p0", "p1", "p2")
MODELS = ("NVIDIA H100 80GB HBM3", "Mystery GPU")  # a known device and an unknown one
RESOLVER = DeviceResolver(PeakTable())

_ratio = st.one_of(st.none(), st.floats(0.0, 1.0))
_counters = st.fixed_dictionaries(
    {},
    optional={
        "utilization": st.floats(0.0, 1.0),
        "sm_active": st.floats(0.0, 1.0),
        "tensor_active": st.floats(0.0, 1.0),
        "sm_clock_hz": st.floats(1e8, 2e9),
        "max_sm_clock_hz": st.floats(1e8, 2e9),
        "compute_processes": st.integers(0, 3),
    },
)


@st.composite
def _shares(draw: st.DrawFn) -> list[GpuJobShare]:
    """Two or more jobs on one GPU, with weights that add up to 1, as an exporter measures them."""
    jobs = draw(st.lists(st.sampled_from(JOB_IDS), min_size=2, max_size=4, unique=True))
    weights = draw(st.lists(st.floats(0.0, 10.0), min_size=len(jobs), max_size=len(jobs)))
    method = draw(st.sampled_from(("process_utilization", "accounting", "equal_split")))
    total = sum(weights)
    if total <= 0 or method == "equal_split":
        weights, total = [1.0] * len(jobs), float(len(jobs))
    return [GpuJobShare(job_id=j, share=w / total, method=method) for j, w in zip(jobs, weights, strict=True)]


@st.composite
def _gpu(draw: st.DrawFn, node: str, index: int) -> GpuSample:
    up = draw(st.booleans().map(lambda b: b or draw(st.integers(0, 9)) > 0))  # ~1 in 20 down
    shares = draw(st.one_of(st.none(), st.none(), _shares()))
    job_id = draw(st.one_of(st.none(), st.sampled_from(JOB_IDS)))
    if shares is not None:
        job_id = max(shares, key=lambda s: s.share).job_id
    return GpuSample(
        uuid=f"{node}-{index}",
        index=index,
        name=draw(st.sampled_from(MODELS)),
        job_id=job_id,
        up=up,
        shares=shares,
        **(draw(_counters) if up else {}),
    )


@st.composite
def _node(draw: st.DrawFn, index: int) -> NodeView:
    name = f"node-{index}"
    samples = [draw(_gpu(name, i)) for i in range(draw(st.integers(0, 8)))]
    gpus = gpu_views(name, 1.0, samples, RESOLVER)  # as a push builds them
    return build_node_view(
        name=name,
        pool=draw(st.sampled_from(POOLS)),
        last_seen_at=1.0,
        last_sample_timestamp=1.0,
        samples_received=1,
        updated_at=1.0,
        gpus=gpus,
    )


@st.composite
def _job(draw: st.DrawFn, job_id: str) -> JobView:
    status = draw(st.sampled_from(("running", "pending")))
    mfu = draw(_ratio) if status == "running" else None
    latest: ReportOutcome | None = None
    if status == "running":
        latest = ReportOutcome(mfu=mfu, peak_flops_per_gpu=989e12 if mfu is not None else None)
    return JobView(
        job_id=job_id,
        status=status,
        kind="training",
        name=None,
        team=draw(st.sampled_from((None, "t0", "t1"))),
        pool=draw(st.sampled_from((*POOLS, "no-such-pool"))),
        gpu_model=None,
        dtype="bf16",
        num_gpus=draw(st.one_of(st.none(), st.integers(1, 200))),
        gpus_requested=draw(st.one_of(st.none(), st.integers(1, 64))),
        model_key=None,
        created_at=1.0,
        started_at=1.0,
        last_report_at=1.0,
        ended_at=None,
        latest=latest,
        updated_at=1.0,
    )


@st.composite
def _snapshot(draw: st.DrawFn) -> Snapshot:
    nodes = tuple(draw(_node(i)) for i in range(draw(st.integers(0, 12))))
    job_ids = draw(st.lists(st.sampled_from(JOB_IDS), unique=True))
    return Snapshot(now=1.0, nodes=nodes, jobs=tuple(draw(_job(j)) for j in job_ids), baselines={})


@pytest.mark.slow  # 200 random snapshots
@settings(max_examples=200, deadline=None)
@given(_snapshot())
def test_gpu_states_add_up_per_cluster_pool_and_node(snapshot: Snapshot) -> None:
    summary = summarize(snapshot)
    reporting = reporting_jobs(snapshot)
    cluster = summary.cluster.states()
    assert set(cluster) == set(STATES)
    assert sum(cluster.values()) == summary.gpus_known == sum(len(n.gpus) for n in snapshot.nodes)

    direct: dict[str | None, dict[str, int]] = {}
    for node in snapshot.nodes:
        per_node = node_gpu_states(node, reporting)
        assert sum(per_node.values()) == len(node.gpus)
        counted = {s: 0 for s in STATES}
        for gpu in node.gpus:
            counted[gpu_state(gpu, reporting)] += 1  # one GPU at a time, against the O(nodes) sums
        assert per_node == counted
        pool = direct.setdefault(node.pool, {s: 0 for s in STATES})
        for state, n in counted.items():
            pool[state] += n

    assert set(summary.pools) == {p for p in direct if p is not None}  # pools come from nodes only
    for name, group in summary.pools.items():
        assert group.states() == direct[name]
    for state in STATES:
        assert cluster[state] == sum(counts[state] for counts in direct.values())
    # The periodic billing's own count (a fraction of a summary's cost) agrees with the summary; a pool with
    # neither idle nor unreported GPUs may be left out of it (nothing to bill).
    billed = state_counts(state_prices(snapshot, NO_PRICES))
    assert billed[None] == (cluster["idle"], cluster["unreported"])
    assert set(billed) - {None} <= set(summary.pools)
    for name, group in summary.pools.items():
        assert billed.get(name, (0, 0)) == (group.gpus_idle, group.gpus_unreported)

    # Unverified GPUs are apart: a job's allocated GPUs are the attributed ones, never its num_gpus. A shared GPU
    # is one of each of its jobs' GPUs, and counts its share in each job's GPU-equivalents.
    def on(gpu: GpuView, job_id: str) -> bool:
        return gpu.up and (gpu.job_id == job_id if gpu.shares is None else any(s.job_id == job_id for s in gpu.shares))

    def share(gpu: GpuView, job_id: str) -> float:
        return 1.0 if gpu.shares is None else sum(s.share for s in gpu.shares if s.job_id == job_id)

    every = [g for n in snapshot.nodes for g in n.gpus]
    attributed = {j: sum(1 for g in every if on(g, j)) for j in JOB_IDS}
    for job_id, account in summary.jobs.items():
        assert account.gpus_attributed == attributed[job_id]
        assert account.gpus_shared == sum(1 for g in every if on(g, job_id) and g.shares is not None)
        expected_share = sum(share(g, job_id) for g in every if on(g, job_id))
        assert (account.gpu_share or 0.0) == pytest.approx(expected_share)
        assert account.gpus_unverified >= 0
    # Each shared GPU's shares add up to 1 over its jobs, so the jobs' GPU-equivalents add up to the GPUs they hold.
    held = sum(1 for g in every if g.up and g.job_id is not None)
    total_share = sum(a.gpu_share or 0.0 for a in summary.jobs.values() if a.gpus_attributed)
    assert total_share == pytest.approx(held)
    for gpu in every:
        if gpu.shares is not None and gpu.up:
            assert sum(s.share for s in gpu.shares) == pytest.approx(1.0, abs=1e-3)
            assert gpu_state(gpu, reporting) in ("reporting", "unreported")  # one state, whatever its jobs
    coverage = summary.cluster.reported_coverage
    assert coverage is None or 0.0 <= coverage <= 1.0
    for group in (summary.cluster, *summary.pools.values(), *summary.teams.values()):
        for value in (group.mfu, group.allocated_mfu):
            assert value is None or 0.0 <= value <= 1.0 + 1e-9

    # /metrics says the same.
    text = MetricsRenderer(SelfMetrics(), lambda: (0.0, 0)).render(snapshot, summary).decode()
    samples = metric_samples(text)
    exposed = {s: samples[("mfumon_cluster_gpus", frozenset({("state", s)}))] for s in STATES}
    assert exposed == cluster
    for name in summary.pools:
        for state in STATES:
            labels = frozenset({("pool", name), ("state", state)})
            assert samples[("mfumon_pool_gpus", labels)] == direct[name][state]
