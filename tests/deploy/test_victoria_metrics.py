"""A second engine: test_global_view's fleet, stored in VictoriaMetrics, its rules evaluated by vmalert.

Two clusters, "a" and "b", each `mfumon serve` fed by the simulated cluster of `mfumon demo` (the same jobs and nodes
in both) and scraped by its own `vmagent` with deploy/prometheus/prometheus.yml's aggregator job, which remote-writes
everything, labelled `cluster=a` (or b), into one `victoria-metrics` single node. `vmalert` evaluates the shipped rule
files (timings shortened as in test_prometheus_live) against it, writing recorded series and alert state back. Through
VictoriaMetrics' Prometheus-compatible API (MetricsQL, not PromQL) every dashboard query returns data for cluster a,
for cluster b and for All, every recording rule yields one series per cluster, and the MFU alert fires once per cluster
(vmalert's own /api/v1/alerts).

Each vmagent also remote-writes the same samples into a Prometheus receiver (`-remoteWrite.queues=1`: parallel queues
arrive out of order and the receiver drops samples), so that every shipped expression that measures a durable counter's
growth over a window (grafana/_window.py; the rules spell the same cases out) is evaluated on both engines over the
same samples at the same instant: PromQL and MetricsQL must give the same series and values, whichever case applies
(the store younger than the window, the series older than it, the series born inside it).

Flags that keep it fast and deterministic (Debian's 1.79 packages):

* victoria-metrics `-search.latencyOffset=0s`: by default a query whose time is within 30 s of now is moved 30 s back
  (samples that recent may be incomplete), so nothing scraped in the last 30 s would be seen, and vmalert would
  evaluate every rule on 30 s old data. `-search.disableCache`: no response cache, so a query polled while series
  arrive never answers from an older result.
* vmagent `-remoteWrite.flushInterval=1s` (its default, stated) with `scrape_interval: 1s`; vmalert
  `-evaluationInterval=1s` and `-remoteWrite.flushInterval=1s` (default 5 s): a recording rule that reads another
  rule's series sees it only once vmalert has written it into VictoriaMetrics, so each link of a chain costs a flush.
* vmalert `-notifier.url` points at a local sink that accepts and drops every notification: 1.79 has no
  `-notifier.blackhole` and will not start alerting rules without a notifier.
"""

from __future__ import annotations

import math
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import yaml

from tests.conftest import reserved_port, start_server, stop_process
from tests.deploy._support import (
    AGGREGATOR_JOB,
    HEALTHY_JOB,
    LOW_MFU_JOB,
    PROMETHEUS_DIR,
    all_rules,
    dashboard_queries,
    live_cluster,
    live_settings,
    load_dashboards,
    metric_names,
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
TOOLS = ("victoria-metrics", "vmagent", "vmalert")
PACKAGE = "victoria-metrics"  # Debian's, with all three


def _scrape_config(aggregator_url: str) -> dict:
    """deploy/prometheus/prometheus.yml's aggregator job, scraping `aggregator_url` every second, for vmagent."""
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == AGGREGATOR_JOB]
    job.update(scrape_interval="1s", scrape_timeout="1s")
    job["static_configs"] = [{"targets": [urlparse(aggregator_url).netloc]}]
    return {"global": {"scrape_interval": "1s"}, "scrape_configs": [job]}


@contextmanager
def _victoria_process(work: Path, tool: str, *args: str) -> Iterator[str]:
    """Run `tool` (victoria-metrics, vmagent or vmalert) on a port of its own with `args`, its log in `work`; yield
    its URL once /health answers, and stop it on leaving."""
    log_path = work / f"{tool}.log"
    with reserved_port() as port, open(log_path, "wb") as log:
        url = f"http://127.0.0.1:{port}"
        cmd = [require_tool(tool, PACKAGE), f"-httpListenAddr=127.0.0.1:{port}", *args]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        try:

            def _healthy() -> bool:
                assert proc.poll() is None, f"{tool} exited:\n{log_path.read_text(errors='replace')[-3000:]}"
                try:
                    return httpx.get(f"{url}/health", timeout=1.0).status_code == 200
                except httpx.TransportError:
                    return False

            wait_for(f"{tool} to answer", _healthy, timeout_seconds=30.0)
            yield url
        finally:
            stop_process(proc)


class _Sink(BaseHTTPRequestHandler):
    """An Alertmanager that accepts every notification and keeps none."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def _notification_sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Fleet:
    """The store and the ruler, asked through one kept-alive client: a fresh connection (and TLS context) per query,
    as httpx.get makes, costs tens of milliseconds on a busy machine, and the tests ask hundreds of queries a pass."""

    victoria_metrics: str  # the store's URL: its Prometheus-compatible query API
    vmalert: str  # the ruler's URL: its rules and alerts
    prometheus: str  # a Prometheus receiver fed the same samples, to compare the engines
    started: float  # Unix time before the first scrape of either cluster
    http: httpx.Client

    def query(self, expr: str, *, at: float | None = None, engine: str = "") -> list[dict[str, Any]]:
        """The result of the instant query `expr` on VictoriaMetrics (or on `engine`'s URL), at `at` (Unix seconds)
        or now, asserted successful."""
        params: dict[str, Any] = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
        body = self.http.get(f"{engine or self.victoria_metrics}/api/v1/query", params=params).json()
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def firing(self, alertname: str) -> list[dict[str, Any]]:
        """The alerts named `alertname` that vmalert holds firing."""
        alerts = self.http.get(f"{self.vmalert}/api/v1/alerts").json()["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    for tool in TOOLS:
        require_tool(tool, PACKAGE)
    with ExitStack() as stack:
        work = tmp_path_factory.mktemp("victoria-metrics")
        vm = stack.enter_context(
            _victoria_process(
                work,
                "victoria-metrics",
                f"-storageDataPath={work / 'data'}",
                "-search.latencyOffset=0s",
                "-search.disableCache",
            )
        )
        receiver_work = tmp_path_factory.mktemp("prometheus-receiver")
        prometheus = stack.enter_context(start_prometheus(receiver_work, {}, "--web.enable-remote-write-receiver"))
        ruler_work = tmp_path_factory.mktemp("vmalert")
        write_shortened_rules(ruler_work / "rules")
        sink = stack.enter_context(_notification_sink())
        vmalert = stack.enter_context(
            _victoria_process(
                ruler_work,
                "vmalert",
                f"-rule={ruler_work / 'rules'}/*.yml",
                f"-datasource.url={vm}",
                f"-remoteWrite.url={vm}",
                f"-remoteRead.url={vm}",
                "-remoteWrite.flushInterval=1s",
                "-evaluationInterval=1s",
                f"-notifier.url={sink}",
            )
        )
        started = time.time()
        for cluster in CLUSTERS:
            aggregator_work = tmp_path_factory.mktemp(f"aggregator-{cluster}")
            server = stack.enter_context(start_server(aggregator_work, live_settings(aggregator_work)))
            stack.enter_context(simulating(server.url, live_cluster()))
            agent_work = tmp_path_factory.mktemp(f"vmagent-{cluster}")
            (agent_work / "scrape.yml").write_text(yaml.safe_dump(_scrape_config(server.url), sort_keys=False))
            stack.enter_context(
                _victoria_process(
                    agent_work,
                    "vmagent",
                    f"-promscrape.config={agent_work / 'scrape.yml'}",
                    f"-remoteWrite.url={vm}/api/v1/write",
                    f"-remoteWrite.url={prometheus}/api/v1/write",
                    "-remoteWrite.queues=1",
                    f"-remoteWrite.label=cluster={cluster}",
                    f"-remoteWrite.tmpDataPath={agent_work / 'remotewrite'}",
                    "-remoteWrite.flushInterval=1s",
                )
            )
        http = stack.enter_context(httpx.Client(timeout=10.0))
        yield Fleet(vm, vmalert, prometheus, started, http)


def test_both_clusters_arrive_apart(fleet: Fleet) -> None:
    def both() -> set[str]:
        up = fleet.query(f'up{{job="{AGGREGATOR_JOB}"}} == 1')
        return {s["metric"].get("cluster", "") for s in up} if len(up) == 2 else set()

    assert wait_for("both clusters' aggregators", both) == set(CLUSTERS)


def test_every_recording_rule_evaluates_per_cluster(fleet: Fleet) -> None:
    names = sorted(n for n in recorded_names() if not is_fleet_constant(n))

    def missing() -> list[tuple[str, list[str]]]:
        out = []
        for name in names:
            result = fleet.query(f"count by (cluster) ({name})")
            seen = {s["metric"].get("cluster", "") for s in result}
            if seen != set(CLUSTERS):
                out.append((name, sorted(seen)))
        return out

    wait_until_none_left("recording rules without one series per cluster", missing)
    groups = fleet.http.get(f"{fleet.vmalert}/api/v1/rules").json()["data"]["groups"]
    failing = [(r["name"], r["lastError"]) for g in groups for r in g["rules"] if r.get("lastError")]
    assert not failing
    # The same job id in both clusters stays two jobs: one info series each, not one merged.
    info = fleet.query(f'job_id:mfumon_job_info:topk1{{job_id="{HEALTHY_JOB}"}}')
    assert sorted(s["metric"]["cluster"] for s in info) == sorted(CLUSTERS)


def test_mfu_alert_fires_once_per_cluster(fleet: Fleet) -> None:
    def per_cluster() -> list[str] | None:
        firing = fleet.firing("MfumonTrainingMFULow")
        clusters = sorted(a["labels"].get("cluster", "") for a in firing)
        return clusters if clusters == sorted(CLUSTERS) else None

    wait_for("MfumonTrainingMFULow in each cluster", per_cluster)
    assert {a["labels"]["job_id"] for a in fleet.firing("MfumonTrainingMFULow")} == {LOW_MFU_JOB}
    assert not fleet.firing("MfumonAggregatorDown")


def test_cluster_variable_lists_both_clusters(fleet: Fleet) -> None:
    wait_for("both clusters", lambda: len(fleet.query(f'up{{job="{AGGREGATOR_JOB}"}}')) == 2)
    for name, dashboard in load_dashboards().items():
        query = parse_label_values(variables(dashboard)["cluster"]["query"])
        params = {"match[]": f"{query.metric}{query.matchers}"}
        response = fleet.http.get(f"{fleet.victoria_metrics}/api/v1/label/cluster/values", params=params)
        assert sorted(response.json()["data"]) == sorted(CLUSTERS), name


@pytest.mark.parametrize("cluster", [*CLUSTERS, ".*"], ids=["a", "b", "All"])
def test_every_dashboard_query_returns_data_per_cluster_and_for_all(fleet: Fleet, cluster: str) -> None:
    queries = dashboard_queries({"cluster": cluster, "pool": ".*", "team": ".*", "node": ".*", "job": HEALTHY_JOB})

    def without_data() -> list[tuple[str, str, str]]:
        # A quantile of buckets that did not grow is NaN on Prometheus and no sample on VictoriaMetrics: the queue-
        # wait quantiles while no job has started since the store's first scrape (the demo starts its jobs before).
        # Prometheus' answer is what the live tests on it accept, so the same stands here; anything else must be data.
        return [q for q in queries if not fleet.query(q[2]) and not fleet.query(q[2], engine=fleet.prometheus)]

    wait_until_none_left(f"dashboard queries without data for cluster {cluster}", without_data)
    if cluster == ".*":  # All: the fleet panels draw one line per cluster
        (mfu,) = [q for _, title, q in queries if title == "MFU by cluster"]
        assert sorted(s["metric"]["cluster"] for s in fleet.query(mfu)) == sorted(CLUSTERS)


# -- the two engines on the same samples ------------------------------------------------------------------------------

#: The shortened window the comparison puts in place of 1h, 1d and the dashboard's range: a test cannot wait an hour,
#: and a short window lets one run see every case (the store younger than it, series older than it, series born in it).
COMPARE_WINDOW = "12s"
_WINDOW = re.compile(r"(?<=\[)\d+[smhd](?=\])|(?<=offset )\d+[smhd]")


_TOPK = re.compile(r"^(?:topk|bottomk) by \([^)]*\) \(\d+, ")


def _without_topk(expr: str) -> str:
    """`topk by (...) (k, X) rest` -> `(X) rest`: among equal values the engines may keep different series."""
    match = _TOPK.match(expr)
    if match is None:
        return expr
    depth = 1
    for end in range(match.end(), len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[end], 0)
        if depth == 0:
            return f"({expr[match.end() : end]}){expr[end + 1 :]}"
    raise ValueError(f"unbalanced {expr!r}")


def _window_growth_exprs() -> list[tuple[str, str]]:
    """(where, expression) of every shipped board query and rule that measures a durable counter's growth over a
    window and reads raw series only (a recorded series is the ruler's: vmalert's and a Prometheus's evaluations run
    at different instants), its windows shortened to COMPARE_WINDOW."""
    found = [(f"{name}: {title}", q) for name, title, q in dashboard_queries(_ALL)]
    found += [(rule.get("record") or rule["alert"], rule["expr"]) for rule in all_rules()]
    out = []
    for where, expr in found:
        if "min_over_time(" in expr and not any(":" in name for name in metric_names(expr)):
            out.append(
                (
                    where,
                    _WINDOW.sub(COMPARE_WINDOW, _without_topk(expr)),
                )
            )
    return out


_ALL = {"cluster": ".*", "pool": ".*", "team": ".*", "node": ".*", "job": ".*"}


def _series(result: list[dict[str, Any]]) -> dict[str, float]:
    """Labels -> value; NaN left out: Prometheus returns a NaN sample (a quantile of empty buckets) where
    VictoriaMetrics returns none, and a board draws neither."""
    values = {repr(sorted(s["metric"].items())): float(s["value"][1]) for s in result}
    return {k: v for k, v in values.items() if not math.isnan(v)}


def _between_scrapes(fleet: Fleet, at: float) -> float:
    """An instant near `at` that is no sample's timestamp, nor is it a whole number of seconds from one: the two
    engines bound a range differently at its left end (Prometheus 2 includes a sample exactly there, VictoriaMetrics
    and Prometheus 3 do not), and with 1 s scrapes every sample of a cluster shares its scrape's phase."""
    stamps = fleet.query(f'timestamp(up{{job="{AGGREGATOR_JOB}"}})', at=at)
    phases = sorted(float(s["value"][1]) % 1.0 for s in stamps)
    gaps = [(b - a, a) for a, b in zip(phases, [*phases[1:], phases[0] + 1.0], strict=True)]
    width, start = max(gaps)
    return int(at) - 2 + (start + width / 2) % 1.0


def test_window_growth_is_the_same_on_prometheus_and_victoria_metrics(fleet: Fleet) -> None:
    exprs = _window_growth_exprs()
    assert len(exprs) >= 20, exprs  # the boards' GPU-hours, the goodput and waste rules, the queue waits...
    window = int(COMPARE_WINDOW[:-1])
    wait_for("the fleet to outlive the compared window", lambda: time.time() > fleet.started + 3 * window)
    # once while the window still reaches back before the first scrape (the store younger than it), once later
    early, late = fleet.started + window - 1, time.time() - 2
    for at, must_grow in ((_between_scrapes(fleet, early), False), (_between_scrapes(fleet, late), True)):
        compared = 0
        for where, expr in exprs:
            victoria = _series(fleet.query(expr, at=at))
            prometheus = _series(fleet.query(expr, at=at, engine=fleet.prometheus))
            assert victoria.keys() == prometheus.keys(), (where, expr, at, victoria, prometheus)
            for key, value in victoria.items():
                assert value == pytest.approx(prometheus[key], rel=1e-9, abs=1e-9), (where, key, at, expr)
            compared += sum(1 for v in victoria.values() if v > 0)
        assert compared > 0 or not must_grow, at  # the late window has growth to compare; the early one may not
    # The control: increase() itself, on the same samples at the same instant, is not the same on the two engines
    # (Prometheus extrapolates to the window's edges, VictoriaMetrics does not), which is why nothing ships with it.
    naive = f"max by (cluster, category) (increase(mfumon_cluster_gpu_seconds_total[{COMPARE_WINDOW}]))"
    victoria = _series(fleet.query(naive, at=at))
    prometheus = _series(fleet.query(naive, at=at, engine=fleet.prometheus))
    growing = [key for key, value in victoria.items() if value > 0]
    assert growing, victoria
    assert any(victoria[key] != pytest.approx(prometheus.get(key, 0.0), rel=1e-3) for key in growing)
