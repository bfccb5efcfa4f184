"""A global view fed by remote_write: two clusters, each with its aggregator and Prometheus, one central Prometheus.

Each cluster is `mfumon serve` fed by the simulated cluster of `mfumon demo` (the same jobs and nodes in both: the
same job ids in two clusters are the case that must not mix) and scraped by a Prometheus whose configuration is
deploy/prometheus/prometheus.yml with `external_labels: {cluster: a}` (or b) and a `remote_write` to the third, a
Prometheus started with `--web.enable-remote-write-receiver` that evaluates the shipped rules (timings shortened as in
test_prometheus_live). On that global one every dashboard query returns data for cluster a, for cluster b and for All,
every recording rule yields one series per cluster, and the MFU alert fires once per cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from urllib.parse import urlparse

import httpx
import pytest
import yaml

from tests.conftest import start_server
from tests.deploy._support import (
    AGGREGATOR_JOB,
    HEALTHY_JOB,
    LOW_MFU_JOB,
    PROMETHEUS_DIR,
    dashboard_queries,
    firing_alerts,
    instant_query,
    live_cluster,
    load_dashboards,
    parse_label_values,
    recorded_names,
    require_tool,
    simulating,
    start_prometheus,
    variables,
    wait_for,
    wait_until_none_left,
    write_shortened_rules,
)
from tests.deploy._two_clusters import is_fleet_constant

pytestmark = pytest.mark.prometheus

CLUSTERS = ("a", "b")


def _edge_config(cluster: str, aggregator_url: str, global_url: str) -> dict:
    """deploy/prometheus/prometheus.yml for one cluster: its name, its aggregator, remote_write to the global view.
    The rules run on the global view only (the other choice, rules at the edge, is in docs/operators/deploy.md)."""
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s", external_labels={"cluster": cluster})
    config.pop("rule_files")
    config["scrape_configs"] = [job for job in config["scrape_configs"] if job["job_name"] == AGGREGATOR_JOB]
    job = config["scrape_configs"][0]
    job.update(scrape_interval="1s", scrape_timeout="1s")
    job["static_configs"] = [{"targets": [urlparse(aggregator_url).netloc]}]
    config["remote_write"] = [
        {"url": f"{global_url}/api/v1/write", "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms"}}
    ]
    return config


@pytest.fixture(scope="module")
def global_view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_tool("prometheus")
    with ExitStack() as stack:
        work = tmp_path_factory.mktemp("global")
        write_shortened_rules(work / "rules")
        central = {"global": {"evaluation_interval": "1s"}, "rule_files": ["rules/*.yml"]}
        global_url = stack.enter_context(start_prometheus(work, central, "--web.enable-remote-write-receiver"))
        for cluster in CLUSTERS:
            server = stack.enter_context(start_server(tmp_path_factory.mktemp(f"aggregator-{cluster}")))
            stack.enter_context(simulating(server.url, live_cluster()))
            edge_work = tmp_path_factory.mktemp(f"prometheus-{cluster}")
            stack.enter_context(start_prometheus(edge_work, _edge_config(cluster, server.url, global_url)))
        yield global_url


def test_both_clusters_arrive_apart(global_view: str) -> None:
    def both() -> set[str]:
        up = instant_query(global_view, f'up{{job="{AGGREGATOR_JOB}"}} == 1')
        return {s["metric"].get("cluster", "") for s in up} if len(up) == 2 else set()

    assert wait_for("both clusters' aggregators", both) == set(CLUSTERS)


def test_every_recording_rule_evaluates_per_cluster(global_view: str) -> None:
    names = sorted(n for n in recorded_names() if not is_fleet_constant(n))

    def missing() -> list[tuple[str, list[str]]]:
        out = []
        for name in names:
            seen = {s["metric"].get("cluster", "") for s in instant_query(global_view, f"count by (cluster) ({name})")}
            if seen != set(CLUSTERS):
                out.append((name, sorted(seen)))
        return out

    wait_until_none_left("recording rules without one series per cluster", missing)
    groups = httpx.get(f"{global_view}/api/v1/rules", timeout=10.0).json()["data"]["groups"]
    unhealthy = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] != "ok"]
    assert not unhealthy
    # The same job id in both clusters stays two jobs: one info series each, not one merged.
    info = instant_query(global_view, f'job_id:mfumon_job_info:topk1{{job_id="{HEALTHY_JOB}"}}')
    assert sorted(s["metric"]["cluster"] for s in info) == sorted(CLUSTERS)


def test_mfu_alert_fires_once_per_cluster(global_view: str) -> None:
    def per_cluster() -> list[str] | None:
        firing = firing_alerts(global_view, "MfumonTrainingMFULow")
        clusters = sorted(a["labels"].get("cluster", "") for a in firing)
        return clusters if clusters == sorted(CLUSTERS) else None

    wait_for("MfumonTrainingMFULow in each cluster", per_cluster)
    assert {a["labels"]["job_id"] for a in firing_alerts(global_view, "MfumonTrainingMFULow")} == {LOW_MFU_JOB}
    assert not firing_alerts(global_view, "MfumonAggregatorDown")


def test_cluster_variable_lists_both_clusters(global_view: str) -> None:
    wait_for("both clusters", lambda: len(instant_query(global_view, f'up{{job="{AGGREGATOR_JOB}"}}')) == 2)
    for name, dashboard in load_dashboards().items():
        query = parse_label_values(variables(dashboard)["cluster"]["query"])
        params = {"match[]": f"{query.metric}{query.matchers}"}
        response = httpx.get(f"{global_view}/api/v1/label/cluster/values", params=params, timeout=10.0)
        assert sorted(response.json()["data"]) == sorted(CLUSTERS), name


@pytest.mark.parametrize("cluster", [*CLUSTERS, ".*"], ids=["a", "b", "All"])
def test_every_dashboard_query_returns_data_per_cluster_and_for_all(global_view: str, cluster: str) -> None:
    queries = dashboard_queries({"cluster": cluster, "pool": ".*", "team": ".*", "node": ".*", "job": HEALTHY_JOB})

    def without_data() -> list[tuple[str, str, str]]:
        return [q for q in queries if not instant_query(global_view, q[2])]

    wait_until_none_left(f"dashboard queries without data for cluster {cluster}", without_data)
    if cluster == ".*":  # All: the fleet panels draw one line per cluster
        (mfu,) = [q for _, title, q in queries if title == "MFU by cluster"]
        assert sorted(s["metric"]["cluster"] for s in instant_query(global_view, mfu)) == sorted(CLUSTERS)
