"""Overlapping Slurm partitions as pools on a real Slurm and a real aggregator (issue 31 #5).

Partition ``train`` is gpu-node-1, ``infer`` is gpu-node-1 and gpu-node-2 (configured down, never started); only
gpu-node-1's exporter reports, with ``--pool h100``. After one ``mfumon scheduler --once`` both partitions are pools
over their own nodes: the node's 8 GPUs count in each, and once in the cluster.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import start_server
from tests.exporter.scheduler.slurm_cluster import slurm_cluster
from tests.utils.factories import metric_samples, metric_value, node_sample

EXTRA = """NodeName=gpu-node-2 NodeAddr=192.0.2.1 CPUs=64 RealMemory=64000 Gres=gpu:h100:8 State=DOWN
PartitionName=infer Nodes=gpu-node-1,gpu-node-2 MaxTime=INFINITE State=UP
"""


def _pool_gpus(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (name, labels), value in metric_samples(text).items():
        if name == "mfumon_pool_gpus":
            pool = dict(labels)["pool"]
            out[pool] = out.get(pool, 0) + value
    return out


@pytest.mark.slow
def test_a_node_in_two_partitions_counts_in_both_pools_and_once_in_the_cluster(tmp_path: Path) -> None:
    with slurm_cluster(extra_config=EXTRA) as slurm, start_server(tmp_path) as server:
        sleep = "--wrap=sleep 600"
        train = slurm.sbatch("-p", "train", "-A", "research", "--gres=gpu:h100:4", "-J", "train4", sleep)
        infer = slurm.sbatch("-p", "infer", "-A", "product", "--gres=gpu:8", "-J", "infer8", sleep)
        deadline = time.monotonic() + 60
        while True:
            states = dict(line.split("|", 1) for line in slurm.run("squeue", "-h", "-o", "%i|%T").splitlines())
            if states.get(train) == "RUNNING" and states.get(infer) == "PENDING":
                break
            assert time.monotonic() < deadline, f"{states}\n{slurm.log()}"
            time.sleep(0.5)
        sample = node_sample(8, pool="h100", utilization=0.0, sm_active=0.0, tensor_active=0.0)
        assert httpx.post(f"{server.url}/v1/nodes/{slurm.node}/samples", json=sample).status_code == 200
        cmd = [sys.executable, "-m", "mfumon", "scheduler", "--source", "slurm", "--url", server.url, "--once"]
        done = subprocess.run(cmd, env=slurm.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

        text = httpx.get(f"{server.url}/metrics").text
        assert _pool_gpus(text) == {"infer": 8, "train": 8}  # h100 is gone: the scheduler lists the node
        cluster = httpx.get(f"{server.url}/v1/cluster").json()
        assert cluster["gpus_idle"] + cluster["gpus_unreported"] + cluster["gpus_reporting"] == 8
        assert metric_value(text, "mfumon_pool_gpus_requested", pool="train") == 4
        assert metric_value(text, "mfumon_pool_resource_satisfaction_ratio", pool="train") == 1
        assert metric_value(text, "mfumon_pool_gpus_requested", pool="infer") == 8
        assert metric_value(text, "mfumon_pool_gpus_queued", pool="infer") == 8
        assert metric_value(text, "mfumon_pool_resource_satisfaction_ratio", pool="infer") == 0
        # Slurm placed the 4-GPU job on the shared node: its other 4 GPUs are free in both partitions.
        assert metric_value(text, "mfumon_pool_free_gpus", pool="train") == 4
        assert metric_value(text, "mfumon_pool_free_gpus", pool="infer") == 4
        sources = httpx.get(f"{server.url}/v1/scheduler").json()["data"]
        assert sources[0]["pools"] == ["infer", "train"]
