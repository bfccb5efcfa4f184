"""Kubernetes through lightkube against the fake API server: the exact merge patches that cordon and taint a node
and undo both, a person's cordon and taints left alone, and a conflicting patch refused and retried."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mfumon.exporter.scheduler.remediate.driver import SchedulerCommandError
from mfumon.exporter.scheduler.remediate.kubernetes import TAINT_KEY, KubernetesDriver
from mfumon.exporter.scheduler.remediate.loop import KillSwitch, Remediator, Retry
from mfumon.exporter.scheduler.remediate.model import Decision, Policy
from tests.exporter.scheduler.fake_kube import FakeKube, fake_kube
from tests.exporter.scheduler.remediate.fakes import FakeAggregator
from tests.exporter.scheduler.remediate.test_loop import Clock

pytest.importorskip("lightkube")

A1, A2, A3 = "gke-a3-pool-7f3a-0001", "gke-a3-pool-7f3a-0002", "gke-a3-pool-7f3a-0003"
MERGE = "application/merge-patch+json"
THEIRS = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.fixture
def driver_for() -> Iterator[Callable[[str], KubernetesDriver]]:
    """lightkube's real client pointed at the fake API server (plain HTTP, no credentials), closed afterwards."""
    from lightkube import Client, KubeConfig
    from lightkube.config.models import Cluster, User

    drivers: list[KubernetesDriver] = []

    def make(url: str) -> KubernetesDriver:
        drivers.append(KubernetesDriver(Client(config=KubeConfig.from_one(cluster=Cluster(server=url), user=User()))))
        return drivers[-1]

    yield make
    for driver in drivers:
        driver.close()


def _remediator(driver: KubernetesDriver, aggregator: FakeAggregator, clock: Clock) -> Remediator:
    policy = Policy(drain_after_seconds=0, resume_after_seconds=600, max_pool_ratio=1.0, max_cluster_ratio=1.0)
    return Remediator(
        driver,
        aggregator.client(),
        policy=policy,
        act=True,
        kill_switch=KillSwitch(environ={}),
        retry=Retry(attempts=2, backoff_seconds=1.0),
        clock=clock,
        sleep=clock.sleep,
        actor="k8s-copy",
    )


def _node(kube: FakeKube, name: str) -> dict[str, Any]:
    node = kube.node(name)
    assert node is not None
    return node


def test_cordon_taint_and_their_removal_are_these_exact_patches(driver_for: Callable[[str], KubernetesDriver]) -> None:
    with fake_kube(kueue=False) as (kube, url):
        _node(kube, A3)["spec"]["taints"] = [THEIRS]  # the operator's own taint stays through both patches
        _node(kube, A2)["spec"]["unschedulable"] = True  # a person cordoned this one
        driver, aggregator, clock = driver_for(url), FakeAggregator(), Clock()
        assert {n.name: n.pools for n in driver.read_nodes()}[A1] == ("a3-pool",)
        for name in (A1, A2, A3):
            aggregator.fail(name, "row_remap_pending", gpu=5)
        loop = _remediator(driver, aggregator, clock)
        loop.run_once()
        taint = {"key": TAINT_KEY, "value": "row_remap_pending", "effect": "NoSchedule"}
        assert kube.patches == [
            (
                f"/api/v1/nodes/{A1}",
                MERGE,
                {"metadata": {"resourceVersion": "990"}, "spec": {"unschedulable": True, "taints": [taint]}},
            ),
            (
                f"/api/v1/nodes/{A3}",
                MERGE,
                {"metadata": {"resourceVersion": "990"}, "spec": {"unschedulable": True, "taints": [THEIRS, taint]}},
            ),
        ]
        assert _node(kube, A1)["spec"] == {**_node(kube, A1)["spec"], "unschedulable": True, "taints": [taint]}
        outcomes = {(r["node"], r["action"], r["reason"], r["outcome"]) for r in aggregator.records}
        assert outcomes == {
            (A1, "cordon", "row_remap_pending", "done"),
            (A3, "cordon", "row_remap_pending", "done"),
            (A2, "cordon", "not_ours", "withheld"),  # a person's cordon: never touched
        }

        kube.patches.clear()
        for name in (A1, A2, A3):
            aggregator.heal(name)
        loop.run_once()
        clock.now += 600
        loop.run_once()
        assert kube.patches == [
            (
                f"/api/v1/nodes/{A1}",
                MERGE,
                {"metadata": {"resourceVersion": "991"}, "spec": {"unschedulable": None, "taints": None}},
            ),
            (
                f"/api/v1/nodes/{A3}",
                MERGE,
                {"metadata": {"resourceVersion": "991"}, "spec": {"unschedulable": None, "taints": [THEIRS]}},
            ),
        ]
        assert "unschedulable" not in _node(kube, A1)["spec"] and "taints" not in _node(kube, A1)["spec"]
        assert _node(kube, A3)["spec"]["taints"] == [THEIRS] and "unschedulable" not in _node(kube, A3)["spec"]
        assert _node(kube, A2)["spec"]["unschedulable"] is True  # still the person's
        resumed = [(r["node"], r["action"], r["outcome"]) for r in aggregator.records if r["reason"] == "healthy"]
        assert resumed == [(A1, "uncordon", "done"), (A3, "uncordon", "done")]


def test_a_patch_from_a_stale_read_is_refused_not_applied(driver_for: Callable[[str], KubernetesDriver]) -> None:
    with fake_kube(kueue=False) as (kube, url):
        driver = driver_for(url)
        stale = {"metadata": {"resourceVersion": "989"}, "spec": {"unschedulable": True}}
        with pytest.raises(SchedulerCommandError, match="409"):
            driver._patch(A1, stale)
        assert "unschedulable" not in _node(kube, A1)["spec"]
        driver.drain(Decision(A1, "drain", "xid", checks=("xid", "responsive")))  # reads the node afresh
        assert _node(kube, A1)["spec"]["taints"] == [
            {"key": TAINT_KEY, "value": "xid.responsive", "effect": "NoSchedule"}
        ]
