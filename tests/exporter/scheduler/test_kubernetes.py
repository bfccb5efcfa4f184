"""Kubernetes: recorded API objects into a snapshot, and the watcher through lightkube against a fake API server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mfumon.exporter.scheduler.kubernetes import ClusterWatcher, build_snapshot, pod_gpus
from mfumon.exporter.workloads import pod_job_id
from tests.conftest import start_server
from tests.exporter.scheduler.fake_kube import FIXTURES, fake_kube

NOW = 1796068800.0  # 2026-11-30T20:00:00Z, after every object in the fixtures was created


def _items(name: str) -> list[dict[str, Any]]:
    return json.loads((FIXTURES / f"{name}.json").read_text())["items"]  # type: ignore[no-any-return]


def _snapshot() -> dict[str, Any]:
    snap = build_snapshot(
        _items("pods"),
        _items("nodes"),
        _items("workloads"),
        _items("clusterqueues"),
        _items("localqueues"),
        _items("resourceflavors"),
        now=NOW,
    )
    return snap.as_json()


def test_pods_become_jobs() -> None:
    body = _snapshot()
    jobs = {j["job_id"]: j for j in body["jobs"]}
    jobset = jobs["team-a:llm-pretrain"]  # JobSet by its label, across its Job's pods
    assert (jobset["status"], jobset["gpus_requested"], jobset["units"]) == ("running", 16, [[8, 2]])
    assert jobset["placement"] == {"gke-a3-pool-7f3a-0001": 8, "gke-a3-pool-7f3a-0002": 8}
    assert (jobset["pool"], jobset["team"], jobset["restarts"]) == ("a3-pool", "team-a", 1)
    finetune = jobs["team-b:finetune"]  # PyTorchJob: master bound, worker unschedulable
    assert (finetune["status"], finetune["gpus_requested"], finetune["gpus_allocated"]) == ("running", 8, 4)
    pending = jobs["team-b:eval"]
    assert (pending["status"], pending["pending_reason"], pending["pool"]) == ("pending", "Unschedulable", "a3-pool")
    assert pending["queued_at"] == pytest.approx(NOW - 3600)
    assert jobs["serving:vllm"]["gpus_requested"] == 1  # a Deployment's pods are one job; a MIG slice counts
    gated = jobs["sweep-42"]  # explicit job id label; Kueue's scheduling gate: pending, not queued
    assert (gated["pending_reason"], "queued_at" in gated) == ("SchedulingGated", False)
    workload = jobs["team-c:big-train"]  # a suspended Job: only its Kueue Workload asks for GPUs
    assert (workload["gpus_requested"], workload["units"], workload["pending_reason"]) == (32, [[8, 4]], "Pending")
    assert "kube-system:coredns" not in jobs  # no GPUs
    assert body["ended"] == [{"job_id": "team-a:crashed", "state": "Failed", "exit_code": 137}]
    quotas = {(q["team"], q.get("pool")): q["gpus"] for q in body["quotas"]}
    assert quotas == {("team-b", "a3-pool"): 16, ("shared-cq", "a3-pool"): 24}  # two namespaces share shared-cq


def test_job_identity_rules() -> None:
    owner = [{"kind": "ReplicaSet", "name": "web-5c9d", "controller": True}]
    assert pod_job_id("ns", "web-5c9d-x", {"pod-template-hash": "5c9d"}, owner) == "ns:web"
    assert pod_job_id("ns", "p", {"ray.io/cluster": "rc"}, None) == "ns:rc"
    assert pod_job_id("ns", "lonely", None, None) == "ns:lonely"
    assert pod_job_id("ns", "p", {"mfumon.io/job-id": "run-7"}, owner) == "run-7"
    init = {"initContainers": [{"resources": {"limits": {"nvidia.com/gpu": 8}}}], "containers": []}
    assert pod_gpus(init) == 8


def _client(url: str) -> Any:
    """lightkube's real client, pointed at the fake API server (plain HTTP, no credentials)."""
    from lightkube import Client, KubeConfig
    from lightkube.config.models import Cluster, User

    return Client(config=KubeConfig.from_one(cluster=Cluster(server=url), user=User()))


def _wait(check: Callable[[], bool], timeout_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


@pytest.mark.slow
def test_watcher_lists_watches_and_relists_through_lightkube() -> None:
    with fake_kube() as (kube, url):
        kube.expire_after_events = True
        watcher = ClusterWatcher(_client(url), watch_timeout_seconds=1)
        watcher.start(timeout_seconds=30)
        try:
            # The recorded events arrive by watch: the worker gets bound, the eval pod goes away.
            def bound() -> bool:
                jobs = {j.job_id: j for j in watcher.snapshot().jobs}
                return jobs["team-b:finetune"].gpus_allocated == 8 and "team-b:eval" not in jobs

            _wait(bound)
            # The next watch answers 410 Gone: the watcher lists again and carries on.
            _wait(lambda: watcher._informers["pods"].relists >= 2)
            assert {j.job_id for j in watcher.snapshot().jobs} >= {"team-a:llm-pretrain", "team-c:big-train"}
            assert "/api/v1/pods?watch" in kube.requests
        finally:
            watcher.stop()


def test_without_kueue_pods_only() -> None:
    with fake_kube(kueue=False) as (_, url):
        watcher = ClusterWatcher(_client(url), watch_timeout_seconds=1)
        watcher.start(timeout_seconds=30)
        try:
            snap = watcher.snapshot()
            assert snap.quotas == [] and "team-c:big-train" not in {j.job_id for j in snap.jobs}
        finally:
            watcher.stop()


@pytest.mark.slow
def test_mfumon_scheduler_kubernetes_end_to_end(tmp_path: Path) -> None:
    with fake_kube() as (_, url), start_server(tmp_path) as server:
        config = tmp_path / "kubeconfig"
        config.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters: [{{name: fake, cluster: {{server: '{url}'}}}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: nobody}}]\nusers: [{name: nobody, user: {}}]\n"
        )
        cmd = [sys.executable, "-m", "mfumon", "scheduler", "--source", "kubernetes", "--url", server.url, "--once"]
        env = {"KUBECONFIG": str(config), "PATH": "/usr/bin:/bin"}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        import httpx

        job = httpx.get(f"{server.url}/v1/jobs/team-a:llm-pretrain").json()
        assert (job["status"], job["source"], job["team"], job["gpus_requested"]) == (
            "running",
            "kubernetes",
            "team-a",
            16,
        )
        sources = httpx.get(f"{server.url}/v1/scheduler").json()["data"]
        assert sources[0]["kind"] == "kubernetes" and len(sources[0]["quotas"]) == 2
