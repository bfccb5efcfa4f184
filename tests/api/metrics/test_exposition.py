"""``/metrics`` is valid exposition text (promtool agrees), unchanged data is not re-rendered, and a node changed
several times before the renderer reaches it is rendered once."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.metrics.self_metrics import SelfMetrics
from mfumon.api.metrics.store import MetricsRenderer, shard_of
from mfumon.api.state.aggregate import summarize
from mfumon.api.state.store import Snapshot
from tests.utils.factories import metric_samples, metric_value, node_sample, node_view, report, scrape
from tests.utils.waiting import eventually


def _populate(client: TestClient) -> None:
    client.post("/v1/nodes/n1/samples", json=node_sample(8, job_id="a", throttle_reasons=[]))
    client.post("/v1/nodes/n2/samples", json=node_sample(8, pool="infer"))
    client.post("/v1/jobs/a/reports", json=report(team='ml "core"\\x', comm_seconds=0.1, step_seconds=1.0))
    client.put("/v1/jobs/b", json={"pool": "infer", "gpus_requested": 4})


def test_promtool_accepts_the_exposition(client: TestClient) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool missing in CI")
        pytest.skip("promtool not installed")
    _populate(client)
    text = scrape(client)
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_parser_round_trip_and_no_job_label(client: TestClient) -> None:
    _populate(client)
    samples = metric_samples(scrape(client))
    assert samples, "no samples parsed"
    assert all("job" not in dict(labels) for _, labels in samples)
    escaped = [dict(lbls) for (name, lbls) in samples if name == "mfumon_job_info"]
    assert {'ml "core"\\x'} <= {lbl["team"] for lbl in escaped}
    assert all(name.startswith("mfumon_") for name, _ in samples)


def test_unchanged_nodes_and_jobs_are_not_rerendered(client: TestClient) -> None:
    _populate(client)
    renderer = client.app.state.ctx.renderer  # type: ignore[attr-defined]
    first = scrape(client)
    before = dict(renderer.renders)

    def per_item(text: str) -> list[str]:
        return [line for line in text.splitlines() if "node=" in line or "job_id=" in line]

    assert per_item(scrape(client)) == per_item(first)
    assert renderer.renders == before
    client.post("/v1/nodes/n2/samples", json=node_sample(8, pool="infer", power_watts=123.0))
    assert eventually(lambda: renderer.waiting() == 0)  # rendered by the event loop soon after the push ...
    assert renderer.renders["node"] == before["node"] + 1
    text = scrape(client)
    assert renderer.renders["node"] == before["node"] + 1  # ... so the scrape only joined it
    assert renderer.renders["job"] == before["job"]
    assert metric_value(text, "mfumon_gpu_power_watts", node="n2", gpu="0") == 123.0
    assert metric_value(text, "mfumon_metrics_renders_total", kind="node") == before["node"] + 1
    assert metric_value(text, "mfumon_metrics_renders_total", kind="job") == before["job"]
    assert metric_value(text, "mfumon_metrics_renders_pending") == 0


def test_a_node_changed_again_before_its_turn_is_rendered_once() -> None:
    """How the renderer sheds work under load; and a node changed before it started (the state loaded at start) is
    rendered without waiting for another change."""
    renderer = MetricsRenderer(SelfMetrics(), refresh_stats=lambda: (0.0, 0))
    views = {"early": node_view(node_sample(8, power_watts=100.0), "early")}
    renderer.node_changed("early")

    async def run() -> None:
        task = asyncio.create_task(renderer.keep_rendering(views.get))
        assert await _rendered(renderer), "a node changed before the renderer started was left waiting"
        assert renderer.renders["node"] == 1
        for watts in (101.0, 102.0, 103.0):  # three pushes within one turn of the event loop
            views["n1"] = node_view(node_sample(8, power_watts=watts), "n1")
            renderer.node_changed("n1")
        assert renderer.waiting() == 1
        assert await _rendered(renderer)
        task.cancel()

    asyncio.run(run())
    assert renderer.renders["node"] == 2  # the early node, then n1 once for its three pushes
    assert b"} 103\n" in renderer._nodes["n1"].chunk["mfumon_gpu_power_watts"]  # from the newest view


def test_a_node_is_rendered_at_most_once_ahead_of_each_scrape(client: TestClient) -> None:
    """Issue 33 #2: a node that pushes k times between two scrapes is rendered once ahead of the scrape (its first
    change) and once more by the scrape (its newest), not k times; with no scrape in between, never again."""
    renderer = client.app.state.ctx.renderer  # type: ignore[attr-defined]
    for node in ("n1", "n2"):
        client.post(f"/v1/nodes/{node}/samples", json=node_sample(8, power_watts=100.0))
    scrape(client)
    before = renderer.renders["node"]
    for watts in (101.0, 102.0, 103.0, 104.0, 105.0):
        assert client.post("/v1/nodes/n1/samples", json=node_sample(8, power_watts=watts)).status_code == 200
        assert eventually(lambda: renderer.waiting() == 0)  # the renderer saw every push
    assert renderer.renders["node"] == before + 1  # the first push since the scrape, rendered ahead of the next one
    assert renderer.pending() == 1  # the newest, left to the scrape
    text = scrape(client)
    assert renderer.renders["node"] == before + 2  # the scrape rendered n1's newest view, once; n2 only joined
    assert metric_value(text, "mfumon_gpu_power_watts", node="n1", gpu="0") == 105.0  # what it serves is current
    assert metric_value(text, "mfumon_metrics_renders_total", kind="node") == before + 2
    assert metric_value(text, "mfumon_metrics_renders_pending") == 0
    client.post("/v1/nodes/n1/samples", json=node_sample(8, power_watts=106.0))
    assert eventually(lambda: renderer.waiting() == 0)
    assert renderer.renders["node"] == before + 3  # rendered by the scrape: the next change is rendered ahead again


def test_a_shard_scrape_renders_only_its_own_nodes(client: TestClient) -> None:
    renderer = client.app.state.ctx.renderer  # type: ignore[attr-defined]
    names = [f"node-{n}" for n in range(8)]
    for name in names:
        client.post(f"/v1/nodes/{name}/samples", json=node_sample(4, power_watts=100.0))
    scrape(client)
    for watts in (101.0, 102.0):  # the second push of each is left to the next scrape
        for name in names:
            client.post(f"/v1/nodes/{name}/samples", json=node_sample(4, power_watts=watts))
        assert eventually(lambda: renderer.waiting() == 0)
    before = renderer.renders["node"]
    mine = [name for name in names if shard_of(name, 2) == 1]
    text = client.get("/metrics", params={"shard": 1, "shards": 2}).text
    assert renderer.renders["node"] == before + len(mine)
    served = {dict(labels)["node"] for name, labels in metric_samples(text) if name == "mfumon_gpu_power_watts"}
    assert served == set(mine)
    assert all(metric_value(text, "mfumon_gpu_power_watts", node=name, gpu="0") == 102.0 for name in mine)


def test_a_node_is_rendered_once_per_scrape_interval_after_its_last_push_before_the_scrape() -> None:
    """Issue 33 #2: scraped every 30 s and pushed every 10 s, a node is rendered ahead once per scrape interval
    (after its last push before the scrape), not three times, and the scrape only joins it."""
    clock = [1000.0]
    renderer = MetricsRenderer(SelfMetrics(), refresh_stats=lambda: (0.0, 0), clock=lambda: clock[0])
    views: dict[str, Any] = {}

    def scrape_now() -> None:
        snapshot = Snapshot(now=clock[0], nodes=tuple(views.values()), jobs=(), baselines={})
        renderer.render(snapshot, summarize(snapshot))

    async def run() -> None:
        task = asyncio.create_task(renderer.keep_rendering(views.get))
        watts = 100.0
        for second in range(0, 181, 10):  # a push every 10 s, a scrape every 30 s (at 5, 35, 65, ...)
            clock[0] = 1000.0 + second
            watts += 1
            views["n1"] = node_view(node_sample(8, power_watts=watts), "n1")
            renderer.node_changed("n1")
            assert await _rendered(renderer)
            if second % 30 == 20:  # the push before each scrape
                clock[0] += 5
                before = renderer.renders["node"]
                scrape_now()
                if second > 50:  # once two scrapes gave the interval, the push before the scrape is the one rendered
                    assert renderer.renders["node"] == before, f"the scrape at {clock[0]} rendered n1 itself"
                assert b"} %d\n" % int(watts) in renderer._nodes["n1"].chunk["mfumon_gpu_power_watts"]
        task.cancel()

    asyncio.run(run())
    # 19 pushes, 6 scrapes: before the scrape interval is known (two scrapes), the first push after a scrape and the
    # scrape itself (2 + 2); then one render per interval, after the push at 80, 110, 140 and 170 s (4).
    assert renderer.renders["node"] == 8


async def _rendered(renderer: MetricsRenderer) -> bool:
    for _ in range(1000):
        await asyncio.sleep(0)
        if renderer.waiting() == 0:
            return True
    return False


def _cluster(client: TestClient, nodes: int) -> None:
    for n in range(nodes):
        body = node_sample(4, job_id=f"j{n % 7}", pool=f"p{n % 3}", throttle_reasons=["hw_thermal"] if n % 5 else [])
        for g in body["gpus"]:
            g["uuid"] = f"GPU-{n}-{g['index']}"
        assert client.post(f"/v1/nodes/node-{n}/samples", json=body).status_code == 200
    for j in range(7):
        assert client.post(f"/v1/jobs/j{j}/reports", json=report(team=f"t{j % 2}")).status_code == 200
    client.put("/v1/jobs/waiting", json={"pool": "p1", "gpus_requested": 16})


# Self-metrics that change from one scrape to the next by themselves.
_VOLATILE = (
    "mfumon_scrape_duration_seconds",
    "mfumon_metrics_scrapes_total",  # counts the scrapes themselves
    "mfumon_sample_queue_age_seconds",
    "mfumon_sample_queue_nodes",
    "mfumon_sample_flush_duration_seconds",
    "mfumon_state_refresh_duration_seconds",
)


@pytest.mark.parametrize("shards", [1, 2, 5])
def test_the_shards_together_are_the_unsharded_exposition_series_for_series(client: TestClient, shards: int) -> None:
    _cluster(client, nodes=40)
    client.app.state.ctx.sample_writer.flush()  # type: ignore[attr-defined]
    whole = metric_samples(scrape(client))
    parts = []
    for index in range(shards):
        response = client.get("/metrics", params={"shard": index, "shards": shards})
        assert response.status_code == 200
        parts.append(metric_samples(response.text))
    union: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for part in parts:
        assert not union.keys() & part.keys(), "a series is on two shards"
        union.update(part)
    assert union.keys() == whole.keys()
    assert {k: v for k, v in union.items() if k[0] not in _VOLATILE} == {
        k: v for k, v in whole.items() if k[0] not in _VOLATILE
    }
    # A node's series all live on one shard; job, pool, team, cluster and self series on shard 0 only.
    for index, part in enumerate(parts):
        names = {name for name, _ in part}
        if index > 0:
            assert all(name.startswith(("mfumon_gpu_", "mfumon_node_")) for name in names), names
        nodes = {dict(labels)["node"] for _, labels in part if "node" in dict(labels)}
        assert all(shard_of(node, shards) == index for node in nodes)
    assert all(any(name == "mfumon_node_info" for name, _ in part) for part in parts)  # the hash spreads them


@pytest.mark.parametrize("query", ["shard=0", "shards=2", "shard=2&shards=2", "shard=-1&shards=2", "shard=0&shards=0"])
def test_a_bad_shard_is_a_422(client: TestClient, query: str) -> None:
    response = client.get(f"/metrics?{query}")
    assert response.status_code == 422
    (error,) = response.json()["detail"]  # the shape every other 422 has (the OpenAPI schema documents it)
    assert error["field"] in {"shard", "shards"} and error["loc"][0] == "query"


def test_gzip_when_the_scraper_accepts_it(client: TestClient) -> None:
    _populate(client)
    plain = client.get("/metrics", headers={"Accept-Encoding": "identity"})
    zipped = client.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    assert int(zipped.headers["content-length"]) < len(plain.content) / 3
    assert metric_samples(zipped.text).keys() == metric_samples(plain.text).keys()
