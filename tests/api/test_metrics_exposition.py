"""``/metrics`` is valid exposition text (promtool agrees), and unchanged data is not re-rendered."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import metric_samples, node_sample, report, scrape


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
    scrape(client)
    assert renderer.renders["node"] == before["node"] + 1
    assert renderer.renders["job"] == before["job"]


def test_gzip_when_the_scraper_accepts_it(client: TestClient) -> None:
    _populate(client)
    plain = client.get("/metrics", headers={"Accept-Encoding": "identity"})
    zipped = client.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    assert int(zipped.headers["content-length"]) < len(plain.content) / 3
    assert metric_samples(zipped.text).keys() == metric_samples(plain.text).keys()
