"""Which pools a node counts in (issue 31 #5): the fresh scheduler adapters' pools, else the exporter's ``--pool``."""

from __future__ import annotations

import time

from mfumon.api.db.tables import SchedulerSourceRow
from mfumon.api.pricing import NO_PRICES
from mfumon.api.services.fleet_billing import state_counts, state_prices
from mfumon.api.state.aggregate import summarize
from mfumon.api.state.pools import pool_map, pools_key
from mfumon.api.state.refresh import source_view
from mfumon.api.state.store import ClusterState
from mfumon.api.state.views import SourceView
from tests.utils.factories import node_sample, node_view

TTL = 300.0


def _source(name: str, pools: dict[str, set[str]] | None, at: float) -> SourceView:
    listed = None if pools is None else tuple((p, frozenset(n)) for p, n in sorted(pools.items()))
    return SourceView(name=name, kind="slurm", observed_at=at, synced_at=at, quotas=(), updated_at=at, pools=listed)


def _state(now: float) -> ClusterState:
    state = ClusterState(
        node_ttl_seconds=1e6, job_ttl_seconds=1e6, pending_job_ttl_seconds=1e6, scheduler_ttl_seconds=TTL
    )
    for name, gpus, pool in (("a", 8, "h100"), ("b", 8, "h100"), ("c", 4, "a100")):
        body = node_sample(gpus, pool=pool, utilization=0.0, sm_active=0.0, tensor_active=0.0)
        body["timestamp"] = now
        state.apply_node(node_view(body, name))
    return state


def _gpus(states: dict[str, int]) -> int:
    return sum(states.values())


def test_a_node_in_two_pools_counts_in_both_and_once_in_the_cluster() -> None:
    now = time.time()
    state = _state(now)
    state.apply_source(_source("slurm", {"train": {"a", "b"}, "infer": {"b"}, "empty": set()}, now))
    summary = summarize(state.snapshot(now))
    pools = {name: _gpus(group.states()) for name, group in summary.pools.items()}
    assert pools == {"train": 16, "infer": 8, "empty": 0, "a100": 4}  # c: no partition lists it, its --pool stays
    assert _gpus(summary.cluster.states()) == 20
    assert summary.capacity is not None
    assert summary.capacity.pools["infer"].free_per_node == [8]
    assert sorted(summary.capacity.pools) == ["a100", "empty", "infer", "train"]
    billing = state_counts(state_prices(state.snapshot(now), NO_PRICES))
    assert billing[None] == (20, 0) and billing["train"] == (16, 0) and billing["infer"] == (8, 0)


def test_two_sources_naming_one_pool_add_their_nodes_up() -> None:
    now = time.time()
    state = _state(now)
    state.apply_source(_source("slurm-east", {"train": {"a"}}, now))
    state.apply_source(_source("slurm-west", {"train": {"b"}}, now))
    state.apply_source(_source("k8s", None, now))  # defines no pools
    assert {n: _gpus(g.states()) for n, g in summarize(state.snapshot(now)).pools.items()} == {"train": 16, "a100": 4}


def test_a_silent_adapters_pools_stop_counting_after_the_scheduler_ttl() -> None:
    now = time.time()
    state = _state(now)
    state.apply_source(_source("slurm", {"train": {"a", "b", "c"}}, now - TTL - 1))
    assert sorted(summarize(state.snapshot(now)).pools) == ["a100", "h100"]
    state.apply_source(_source("slurm", {"train": {"a", "b", "c"}}, now))
    assert sorted(summarize(state.snapshot(now)).pools) == ["train"]


def test_the_map_is_rebuilt_only_when_the_pools_changed() -> None:
    now = time.time()
    state = _state(now)
    state.apply_source(_source("slurm", {"train": {"a"}}, now))
    first = state.snapshot(now).pools
    state.apply_source(_source("slurm", {"train": {"a"}}, now + 1))  # a new sync, the same pools
    assert state.snapshot(now + 1).pools is first
    state.apply_source(_source("slurm", {"train": {"a", "b"}}, now + 2))
    assert state.snapshot(now + 2).pools is not first


def test_pool_map_gives_a_nodes_pools_by_name() -> None:
    now = time.time()
    pools = pool_map(pools_key([_source("s", {"zeta": {"n"}, "alpha": {"n", "m"}}, now)]))
    assert pools.listed == ("alpha", "zeta")
    assert pools.by_node == {"n": ("alpha", "zeta"), "m": ("alpha",)}


def test_a_replica_reads_the_pools_from_the_row() -> None:
    row = SchedulerSourceRow(
        name="slurm",
        kind="slurm",
        observed_at=1.0,
        synced_at=2.0,
        quotas=[],
        pools=[{"name": "train", "nodes": ["a", "b"]}],
        updated_at=2.0,
    )
    assert source_view(row).pools == (("train", frozenset({"a", "b"})),)
    row.pools = None
    assert source_view(row).pools is None
