"""``mfumon report`` over several aggregators (issue 34 #3): two real aggregators (two apps, two databases) and one
that does not answer; the fleet row adds the clusters up, the dead one is named, never dropped."""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mfumon.api.core.config import Settings
from mfumon.api.main import create_app
from mfumon.exporter.ops.fleet import ClusterSource, fetch_fleet, load_clusters, source_from_url
from mfumon.exporter.ops.fleet_render import render_fleet_html, render_fleet_markdown
from mfumon.exporter.ops.prices import parse_prices
from mfumon.exporter.ops.text import hours, pct
from tests.conftest import reserved_port
from tests.exporter.ops.test_report import T0, _train, _week
from tests.utils.clock import Clock

STEPS = ("data_wait", "comm_exposed", "bubble", "compute")
NOT_JOBS = ("idle", "unreported")


@pytest.fixture
def two_clusters(migrated_sqlite: Path, tmp_path: Path) -> Iterator[dict[str, TestClient]]:
    """Cluster eu: the simulated week of test_report (two teams, a failure); cluster us: one slow job on 8 GPUs."""
    clients: dict[str, TestClient] = {}
    for name in ("eu", "us"):
        db = tmp_path / f"{name}.db"
        shutil.copyfile(migrated_sqlite, db)
        client = TestClient(create_app(Settings(DATABASE_URL=f"sqlite:///{db}", BASELINE_WARMUP_REPORTS=0)))
        client.__enter__()
        clients[name] = client
    _week(clients["eu"])
    clock = Clock(clients["us"], start=T0)
    _train(clients["us"], clock, "us-slow", 5_000, n=6, comm_seconds=0.5, team="nlp", pool="train")
    yield clients
    for client in clients.values():
        client.__exit__(None, None, None)


def _fleet(two_clusters: dict[str, TestClient], dead_url: str, **kwargs: Any) -> Any:
    sources = [ClusterSource("eu", "http://eu"), ClusterSource("dead", dead_url), ClusterSource("us", "http://us")]

    def open_client(source: ClusterSource) -> contextlib.AbstractContextManager[httpx.Client]:
        if source.name in two_clusters:
            return contextlib.nullcontext(two_clusters[source.name])
        return httpx.Client(base_url=source.url, timeout=2.0)

    return fetch_fleet(sources, open_client, since="7d", generated_at=T0 + 7200, **kwargs)


def test_fleet_rows_add_the_clusters_up_and_the_dead_one_is_named(two_clusters: dict[str, TestClient]) -> None:
    with reserved_port() as port:  # bound, not listening: connections are refused
        dead = f"http://127.0.0.1:{port}"
        fleet = _fleet(two_clusters, dead)
    usage = {n: c.get("/v1/usage", params={"since": "7d"}).json()["cluster"] for n, c in two_clusters.items()}
    assert [name for name, _ in fleet.clusters] == ["eu", "us"]
    assert [(m.name, m.url) for m in fleet.unanswered] == [("dead", dead)]
    assert "cannot reach the aggregator" in fleet.unanswered[0].error

    total = sum(u["total_gpu_seconds"] for u in usage.values()) / 3600
    assert fleet.fleet.gpu_hours == pytest.approx(total)
    assert usage["eu"]["total_gpu_seconds"] > 0 and usage["us"]["total_gpu_seconds"] > 0
    by_category: dict[str, float] = {}
    for u in usage.values():
        for entry in u["waterfall"]:
            by_category[entry["category"]] = by_category.get(entry["category"], 0.0) + entry["gpu_seconds"] / 3600
    assert dict(fleet.fleet.waterfall) == pytest.approx(by_category)
    # Goodput over the fleet: step GPU-seconds over job GPU-seconds, both clusters together.
    steps = sum(h for c, h in by_category.items() if c in STEPS)
    jobs = sum(h for c, h in by_category.items() if c not in NOT_JOBS)
    assert fleet.fleet.goodput == pytest.approx(steps / jobs)
    eu_goodput, us_goodput = usage["eu"]["goodput_ratio"], usage["us"]["goodput_ratio"]
    assert min(eu_goodput, us_goodput) < fleet.fleet.goodput < max(eu_goodput, us_goodput)
    assert min(u["mfu"] for u in usage.values()) < fleet.fleet.mfu < max(u["mfu"] for u in usage.values())

    # Top wasters across both clusters, worst first, each with its cluster.
    wasted = [w.job.wasted_gpu_hours for w in fleet.top_wasters]
    assert wasted == sorted(wasted, reverse=True)
    assert {w.cluster for w in fleet.top_wasters} == {"eu", "us"}
    assert ("us", "us-slow") in {(w.cluster, w.job.job_id) for w in fleet.top_wasters}


def test_markdown_and_html_show_each_cluster_the_fleet_and_who_did_not_answer(
    two_clusters: dict[str, TestClient],
) -> None:
    with reserved_port() as port:
        fleet = _fleet(two_clusters, f"http://127.0.0.1:{port}", prices=parse_prices(["default=2"], "EUR"))
    md = render_fleet_markdown(fleet)
    assert md.startswith("# Fleet GPU-hours report: ")
    assert "2 of 3 clusters answered" in md
    assert f"**Not answering: dead** (http://127.0.0.1:{port})" in md
    eu = dict(fleet.clusters)["eu"].cluster
    assert f"| eu | {hours(eu.gpu_hours)} | {pct(eu.mfu)} | {pct(eu.goodput)} |" in md
    assert f"| **fleet** | **{hours(fleet.fleet.gpu_hours)}** | **{pct(fleet.fleet.mfu)}** |" in md
    assert "## GPU-hours by cause" in md and "## Top wasters across the fleet" in md
    assert "| us | us-slow |" in md
    assert "## Cluster eu" in md and "## Cluster us" in md and "### Teams" in md  # each cluster's own report
    assert f"{2 * fleet.fleet.gpu_hours:,.0f} EUR" in md or f"{2 * fleet.fleet.gpu_hours:,.2f} EUR" in md
    html = render_fleet_html(fleet)
    assert html.startswith("<!DOCTYPE html>") and "<b>Not answering: dead</b>" in html
    assert "<b>fleet</b>" in html and "<td>us-slow</td>" in html


def test_no_cluster_answering_gives_an_empty_fleet(tmp_path: Path) -> None:
    with reserved_port() as port:
        url = f"http://127.0.0.1:{port}"
        fleet = fetch_fleet(
            [ClusterSource("a", url)],
            lambda s: httpx.Client(base_url=s.url, timeout=2.0),
            since="7d",
            generated_at=T0,
        )
    assert fleet.clusters == () and [m.name for m in fleet.unanswered] == ["a"]
    assert fleet.fleet.gpu_hours == 0 and fleet.fleet.goodput is None and fleet.fleet.mfu is None


def test_clusters_file_and_url_names(tmp_path: Path) -> None:
    (tmp_path / "tokens").mkdir()
    (tmp_path / "tokens" / "eu.token").write_text("secret-eu\n")
    path = tmp_path / "clusters.yaml"
    path.write_text(
        "clusters:\n"
        "  - {name: eu, url: 'https://mfumon.eu.example.org', token_file: tokens/eu.token}\n"
        "  - {name: us, url: 'http://10.0.0.5:8000'}\n"
    )
    assert load_clusters(path) == [
        ClusterSource("eu", "https://mfumon.eu.example.org", "secret-eu"),
        ClusterSource("us", "http://10.0.0.5:8000", None),
    ]
    assert source_from_url("http://10.0.0.5:8000") == ClusterSource("10.0.0.5:8000", "http://10.0.0.5:8000")
    assert source_from_url("eu=https://x.example.org") == ClusterSource("eu", "https://x.example.org")
    bad = {
        "clusters: []\n": "expected 'clusters:'",
        "clusters:\n  - {name: a}\n": "needs a name and a url",
        "clusters:\n  - {name: a, url: 'http://a'}\n  - {name: a, url: 'http://b'}\n": "listed twice",
        "clusters:\n  - {name: a, url: 'http://a', token: x}\n": "unknown keys",
        "clusters:\n  - {name: a, url: 'http://a', token_file: missing}\n": "No such file",
        "clusters:\n  - {name: a, url: 'not a url'}\n": "not an http(s) URL",
    }
    for text, message in bad.items():
        path.write_text(text)
        with pytest.raises(ValueError, match=re.escape(message)):
            load_clusters(path)
