"""The scheduler's pools reach every replica (issue 31 #5): ``scheduler_sources.pools`` travels with its row."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.api.state.test_replicas import shared_postgres
from tests.conftest import start_server
from tests.utils.factories import metric_samples, node_sample
from tests.utils.waiting import eventually

__all__ = ["shared_postgres"]


def _pool_gpus(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (name, labels), value in metric_samples(text).items():
        if name == "mfumon_pool_gpus":
            out[dict(labels)["pool"]] = out.get(dict(labels)["pool"], 0) + value
    return out


@pytest.mark.slow
def test_pools_put_to_one_replica_are_the_other_replicas_pools(shared_postgres: str, tmp_path: Path) -> None:
    env = {"MFUMON_REFRESH_INTERVAL_SECONDS": "0.5"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        start_server(tmp_path / "a", env=env, database_url=shared_postgres) as a,
        start_server(tmp_path / "b", env=env, database_url=shared_postgres) as b,
    ):
        assert httpx.post(f"{a.url}/v1/nodes/gpu-node-1/samples", json=node_sample(8, pool="h100")).status_code == 200
        pools = [{"name": "infer", "nodes": ["gpu-node-1", "gpu-node-2"]}, {"name": "train", "nodes": ["gpu-node-1"]}]
        body = {"kind": "slurm", "observed_at": time.time(), "jobs": [], "pools": pools}
        assert httpx.put(f"{a.url}/v1/scheduler/slurm", json=body).status_code == 200

        def b_has_the_pools() -> dict[str, float] | None:
            seen = _pool_gpus(httpx.get(f"{b.url}/metrics").text)
            return seen if seen == {"infer": 8, "train": 8} else None

        assert eventually(b_has_the_pools), _pool_gpus(httpx.get(f"{b.url}/metrics").text)
        assert httpx.get(f"{b.url}/v1/scheduler").json()["data"][0]["pools"] == ["infer", "train"]
