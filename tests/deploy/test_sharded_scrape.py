"""The documented sharded scrape config (docs/operators/scale.md), run by a real Prometheus against a real
aggregator: the shards' targets are all up and together bring in exactly the series of one unsharded scrape."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import start_server
from tests.deploy._support import REPO, require_tool, start_prometheus
from tests.utils.factories import metric_samples, node_sample, report
from tests.utils.waiting import eventually

pytestmark = pytest.mark.prometheus


def _documented_config() -> dict:  # type: ignore[type-arg]
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "operators" / "scale.md").read_text(), re.S)
    return yaml.safe_load(next(b for b in blocks if "__param_shards" in b))


def test_prometheus_scrapes_every_shard_and_gets_the_whole_exposition(tmp_path: Path) -> None:
    require_tool("prometheus")
    config = _documented_config()
    job = config["scrape_configs"][0]
    shards = len(job["static_configs"])
    with start_server(tmp_path) as aggregator, httpx.Client(base_url=aggregator.url) as client:
        for n in range(24):
            body = node_sample(2, job_id=f"j{n % 4}")
            for g in body["gpus"]:
                g["uuid"] = f"GPU-{n}-{g['index']}"
            assert client.post(f"/v1/nodes/node-{n}/samples", json=body).status_code == 200
        for j in range(4):
            assert client.post(f"/v1/jobs/j{j}/reports", json=report()).status_code == 200
        expected = {name for name, _ in metric_samples(client.get("/metrics").text)}
        series = len(metric_samples(client.get("/metrics").text))

        job["scrape_interval"], job["scrape_timeout"] = "1s", "1s"
        for target in job["static_configs"]:
            target["targets"] = [aggregator.url.removeprefix("http://")]
        with start_prometheus(tmp_path, config) as url:

            def query(expr: str) -> list[dict]:  # type: ignore[type-arg]
                try:
                    response = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5)
                except httpx.TransportError:
                    return []
                return response.json()["data"]["result"] if response.status_code == 200 else []

            up = eventually(lambda: (r := query(f'up{{job="{job["job_name"]}"}} == 1')) and len(r) == shards and r)
            assert up, (tmp_path / "prometheus.log").read_text()[-3000:]
            assert sorted(r["metric"]["instance"] for r in up) == sorted(
                f"{aggregator.url.removeprefix('http://')}/shard-{i}" for i in range(shards)
            )
            # Every series of the unsharded exposition arrives once: none lost, none twice across shards.
            count = eventually(lambda: (r := query('count({__name__=~"mfumon_.+"})')) and int(r[0]["value"][1]))
            assert count == series
            names = {r["metric"]["__name__"] for r in query('{__name__=~"mfumon_.+"}')}
            assert names == expected
