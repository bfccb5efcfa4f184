"""Kubernetes pools (issue 31 #5): GPU nodes by their pool label, and Kueue flavors over the nodes they select."""

from __future__ import annotations

import copy
import json
from typing import Any

from mfumon.exporter.scheduler.kubernetes import build_snapshot, gpu_node_pools
from mfumon.exporter.scheduler.model import Pool
from tests.exporter.scheduler.fake_kube import FIXTURES

A3 = ("gke-a3-pool-7f3a-0001", "gke-a3-pool-7f3a-0002", "gke-a3-pool-7f3a-0003")


def _items(name: str) -> list[dict[str, Any]]:
    return json.loads((FIXTURES / f"{name}.json").read_text())["items"]  # type: ignore[no-any-return]


def test_gpu_nodes_by_pool_label_and_a_flavor_that_names_the_pool_is_that_pool() -> None:
    # The recorded cluster: three A3 nodes in node pool a3-pool, a CPU-only default-pool; flavor h100 selects
    # a3-pool by its node-pool label, so it is that pool (as its quotas say), not a second one.
    assert gpu_node_pools(_items("nodes"), _items("resourceflavors")) == [Pool("a3-pool", A3)]


def test_a_flavor_selecting_other_labels_is_a_pool_of_its_own_that_may_overlap() -> None:
    nodes = _items("nodes")
    reserved = copy.deepcopy(nodes[0])
    reserved["metadata"]["labels"]["example.com/reserved"] = "true"
    nodes[0] = reserved
    flavor = {"metadata": {"name": "reserved-h100"}, "spec": {"nodeLabels": {"example.com/reserved": "true"}}}
    pools = gpu_node_pools(nodes, [*_items("resourceflavors"), flavor])
    assert pools == [Pool("a3-pool", A3), Pool("reserved-h100", (A3[0],))]  # A3[0] is in both


def test_the_snapshot_sends_the_pools_unless_exporters_define_them() -> None:
    body = build_snapshot(_items("pods"), _items("nodes"), flavors=_items("resourceflavors"), now=0).as_json()
    assert body["pools"] == [{"name": "a3-pool", "nodes": list(A3)}]
    assert "pools" not in build_snapshot(_items("pods"), _items("nodes"), now=0, pools=False).as_json()
