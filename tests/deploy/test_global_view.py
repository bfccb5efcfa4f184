"""A global view fed by remote_write: two clusters, each with its aggregator and Prometheus, one global Prometheus; on
both topologies docs/operators/deploy.md documents ("Where the rules run").

Each cluster is `mfumon serve` fed by the simulated cluster of `mfumon demo` (the same jobs and nodes in both: the
same job ids in two clusters are the case that must not mix) and scraped by a Prometheus whose configuration is
deploy/prometheus/prometheus.yml with `external_labels: {cluster: a}` (or b), the shipped rules (timings shortened as
in test_prometheus_live) and a `remote_write` to the third, a Prometheus started with `--web.enable-remote-write-
receiver`. The module runs twice:

- **edge**: the rules run on each cluster's Prometheus, which remote-writes everything (recorded series and ALERTS
  included, each with its `cluster`); the global one evaluates no rule. Its store holds each fleet-wide constant once
  per cluster: no panel may match one.
- **central**: the global Prometheus evaluates the rules; each cluster's Prometheus still runs them too (alerts close
  to the data) but remote-writes through the relabelling the docs give, read from the page itself, which drops what
  it records and its alerts. Without it, the global ruler would meet each cluster's copy of a constant beside its own
  and its `on ()` matches would fail.

On the global store, in both, every dashboard query returns data for cluster a, for cluster b and for All, every
recording rule yields series for each cluster (fleet constants: once per cluster at the edge, once without a cluster
centrally), and every alert the simulation has a case for fires once per cluster, for the same jobs, nodes and pools
as on one cluster (SIMULATED_ALERTS), read from `ALERTS`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import yaml

from tests.conftest import start_server
from tests.deploy._support import (
    AGGREGATOR_JOB,
    HEALTHY_JOB,
    PROMETHEUS_DIR,
    dashboard_queries,
    documented_central_relabelling,
    instant_query,
    live_cluster,
    live_settings,
    load_dashboards,
    parse_label_values,
    recorded_names,
    require_tool,
    simulating,
    start_prometheus,
    unexpected_alerts,
    variables,
    wait_for,
    wait_until_none_left,
    write_shortened_rules,
)
from tests.deploy._two_clusters import is_fleet_constant

pytestmark = pytest.mark.prometheus

CLUSTERS = ("a", "b")
TOPOLOGIES = ("central", "edge")


@dataclass(frozen=True)
class GlobalView:
    topology: str  # "central": the global Prometheus runs the rules; "edge": each cluster's does
    url: str  # the global Prometheus, where Grafana would point
    edges: dict[str, str]  # cluster -> its own Prometheus

    @property
    def rulers(self) -> list[str]:
        """The Prometheus servers whose rule results reach the global store."""
        return [self.url] if self.topology == "central" else list(self.edges.values())


def _edge_config(cluster: str, aggregator_url: str, global_url: str, topology: str) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml for one cluster: its name, its aggregator, its rules (rules/*.yml, the
    shortened copy), remote_write to the global view; centrally, through the documented relabelling."""
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s", external_labels={"cluster": cluster})
    config["scrape_configs"] = [job for job in config["scrape_configs"] if job["job_name"] == AGGREGATOR_JOB]
    job = config["scrape_configs"][0]
    job.update(scrape_interval="1s", scrape_timeout="1s")
    job["static_configs"] = [{"targets": [urlparse(aggregator_url).netloc]}]
    write: dict[str, Any] = {
        "url": f"{global_url}/api/v1/write",
        "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms"},
    }
    if topology == "central":
        write["write_relabel_configs"] = documented_central_relabelling()
    config["remote_write"] = [write]
    return config


@pytest.fixture(scope="module", params=TOPOLOGIES)
def global_view(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GlobalView]:
    require_tool("prometheus")
    topology: str = request.param
    with ExitStack() as stack:
        work = tmp_path_factory.mktemp(f"global-{topology}")
        receiver: dict[str, Any] = {"global": {"evaluation_interval": "1s"}}
        if topology == "central":
            write_shortened_rules(work / "rules")
            receiver["rule_files"] = ["rules/*.yml"]
        global_url = stack.enter_context(start_prometheus(work, receiver, "--web.enable-remote-write-receiver"))
        edges = {}
        for cluster in CLUSTERS:
            aggregator_work = tmp_path_factory.mktemp(f"aggregator-{topology}-{cluster}")
            server = stack.enter_context(start_server(aggregator_work, live_settings(aggregator_work)))
            stack.enter_context(simulating(server.url, live_cluster()))
            edge_work = tmp_path_factory.mktemp(f"prometheus-{topology}-{cluster}")
            write_shortened_rules(edge_work / "rules")
            config = _edge_config(cluster, server.url, global_url, topology)
            edges[cluster] = stack.enter_context(start_prometheus(edge_work, config))
        yield GlobalView(topology, global_url, edges)


def test_both_clusters_arrive_apart(global_view: GlobalView) -> None:
    def both() -> set[str]:
        up = instant_query(global_view.url, f'up{{job="{AGGREGATOR_JOB}"}} == 1')
        return {s["metric"].get("cluster", "") for s in up} if len(up) == 2 else set()

    assert wait_for("both clusters' aggregators", both) == set(CLUSTERS)


def test_every_recording_rule_evaluates_per_cluster(global_view: GlobalView) -> None:
    central = global_view.topology == "central"
    per_cluster = sorted(n for n in recorded_names() if not (central and is_fleet_constant(n)))

    def missing() -> list[tuple[str, list[str]]]:
        out = []
        for name in per_cluster:
            counts = instant_query(global_view.url, f"count by (cluster) ({name})")
            seen = {s["metric"].get("cluster", "") for s in counts}
            if seen != set(CLUSTERS):
                out.append((name, sorted(seen)))
        return out

    wait_until_none_left("recording rules without series for each cluster", missing)
    for ruler in global_view.rulers:
        groups = httpx.get(f"{ruler}/api/v1/rules", timeout=10.0).json()["data"]["groups"]
        unhealthy = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] != "ok"]
        assert not unhealthy, ruler
    # The same job id in both clusters stays two jobs: one info series each, not one merged.
    info = instant_query(global_view.url, f'job_id:mfumon_job_info:topk1{{job_id="{HEALTHY_JOB}"}}')
    assert sorted(s["metric"]["cluster"] for s in info) == sorted(CLUSTERS)
    # Fleet constants: centrally, the global ruler's alone (the edges' copies dropped on the way); at the edge, one
    # per cluster, each with its cluster label (which is why no panel may match one `on ()`).
    for name in sorted(n for n in recorded_names() if is_fleet_constant(n)):
        clusters = Counter(s["metric"].get("cluster", "") for s in instant_query(global_view.url, name))
        if central:
            assert set(clusters) == {""}, (name, clusters)
        else:
            assert set(clusters) == set(CLUSTERS) and clusters["a"] == clusters["b"], (name, clusters)


def test_every_simulated_alert_fires_once_per_cluster(global_view: GlobalView) -> None:
    """`ALERTS` on the global store: written by the global ruler (central) or by each cluster's Prometheus with its
    cluster label (edge). Each alert the simulation has a case for fires in each cluster for the subjects it fires
    for on one cluster, and no firing alert lacks its cluster."""

    def wrong() -> list[tuple[str, str, list[str]]]:
        firing = [s["metric"] for s in instant_query(global_view.url, 'ALERTS{alertstate="firing"}')]
        unlabelled = sorted({a["alertname"] for a in firing if not a.get("cluster")})
        out: list[tuple[str, str, list[str]]] = [("no cluster", name, []) for name in unlabelled]
        for cluster in CLUSTERS:
            mine = [labels for labels in firing if labels.get("cluster") == cluster]
            out += [(cluster, alertname, subjects) for alertname, subjects in unexpected_alerts(mine)]
        return out

    wait_until_none_left("simulated alerts not firing once per cluster for their subjects", wrong)
    assert not instant_query(global_view.url, 'ALERTS{alertname="MfumonAggregatorDown"}')


def test_cluster_variable_lists_both_clusters(global_view: GlobalView) -> None:
    wait_for("both clusters", lambda: len(instant_query(global_view.url, f'up{{job="{AGGREGATOR_JOB}"}}')) == 2)
    for name, dashboard in load_dashboards().items():
        query = parse_label_values(variables(dashboard)["cluster"]["query"])
        params = {"match[]": f"{query.metric}{query.matchers}"}
        response = httpx.get(f"{global_view.url}/api/v1/label/cluster/values", params=params, timeout=10.0)
        assert sorted(response.json()["data"]) == sorted(CLUSTERS), name


@pytest.mark.parametrize("cluster", [*CLUSTERS, ".*"], ids=["a", "b", "All"])
def test_every_dashboard_query_returns_data_per_cluster_and_for_all(global_view: GlobalView, cluster: str) -> None:
    queries = dashboard_queries({"cluster": cluster, "pool": ".*", "team": ".*", "node": ".*", "job": HEALTHY_JOB})
    pending = list(queries)

    def without_data() -> list[tuple[str, str, str]]:
        # A query that returned data once has shown it can: only the others are asked again, a few at a time.
        with ThreadPoolExecutor(max_workers=4) as pool:
            answers = list(pool.map(lambda q: instant_query(global_view.url, q[2]), pending))
        pending[:] = [q for q, answer in zip(pending, answers, strict=True) if not answer]
        return pending

    wait_until_none_left(f"dashboard queries without data for cluster {cluster}", without_data)
    if cluster == ".*":  # All: the fleet panels draw one line per cluster
        (mfu,) = [q for _, title, q in queries if title == "MFU by cluster"]
        assert sorted(s["metric"]["cluster"] for s in instant_query(global_view.url, mfu)) == sorted(CLUSTERS)
        # the jobs busy but not reporting, past the grace: in each cluster, with their name, team and pool
        (table, *_) = [q for _, title, q in queries if title == "Busy but not reporting: jobs"]
        rows = instant_query(global_view.url, table)
        assert {r["metric"]["cluster"] for r in rows} == set(CLUSTERS)
        assert all("pool" in r["metric"] for r in rows), rows
