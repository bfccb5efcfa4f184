"""The Grafana dashboards and provisioning: generated, consistent, and querying only metrics that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mfumon.api.serving import SERVING_CATEGORIES
from tests.deploy._support import (
    DASHBOARDS_DIR,
    DEPLOY,
    GRAFANA_DIR,
    compose_mounts,
    exposed_metric_names,
    fill_variables,
    iter_panels,
    iter_queries,
    load_dashboards,
    metric_names,
    parse_label_values,
    recorded_names,
    variables,
)
from tests.deploy._two_clusters import clause_problems

EXPECTED = {
    "mfumon-capacity.json": ("mfumon-capacity", {"cluster", "pool", "team"}),
    "mfumon-cluster-overview.json": ("mfumon-cluster-overview", {"cluster", "pool", "team"}),
    "mfumon-job-drilldown.json": ("mfumon-job-drilldown", {"cluster", "pool", "team", "job"}),
    "mfumon-inference.json": ("mfumon-inference", {"cluster", "pool", "team", "job"}),
    "mfumon-nodes-gpus.json": ("mfumon-nodes-gpus", {"cluster", "node"}),
    "mfumon-pools.json": ("mfumon-pools", {"cluster", "pool"}),
    "mfumon-fleet-health.json": ("mfumon-fleet-health", {"cluster", "node", "pool"}),
    "mfumon-gpu-hours.json": ("mfumon-gpu-hours", {"cluster", "pool", "team"}),
}
SAMPLE_VALUES = {"cluster": ".*", "pool": ".*", "team": ".*", "node": ".*", "job": "some-job"}


def test_committed_json_matches_the_generator() -> None:
    result = subprocess.run(
        [sys.executable, str(GRAFANA_DIR / "generate_dashboards.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_dashboards_have_stable_unique_uids_and_a_classic_schema() -> None:
    dashboards = load_dashboards()
    assert set(dashboards) == set(EXPECTED)
    uids = [d["uid"] for d in dashboards.values()]
    assert len(uids) == len(set(uids))
    for name, dashboard in dashboards.items():
        uid, _ = EXPECTED[name]
        assert dashboard["uid"] == uid
        assert 39 <= dashboard["schemaVersion"] <= 42
        assert "mfu-monitor" in dashboard["tags"]
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids)), name


def test_panels_use_the_datasource_variable_and_do_not_overlap() -> None:
    for name, dashboard in load_dashboards().items():
        assert variables(dashboard)["datasource"]["type"] == "datasource"
        assert variables(dashboard)["datasource"]["query"] == "prometheus"
        cells: set[tuple[int, int]] = set()
        for panel in dashboard["panels"]:
            pos = panel["gridPos"]
            assert pos["x"] + pos["w"] <= 24, (name, panel["title"])
            area = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
            assert not cells & area, (name, panel["title"], "overlaps another panel")
            cells |= area
        for panel in iter_panels(dashboard):
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_template_variables_come_from_label_values() -> None:
    exposed = exposed_metric_names()
    for name, dashboard in load_dashboards().items():
        _, expected_vars = EXPECTED[name]
        query_vars = {n: v for n, v in variables(dashboard).items() if v["type"] == "query"}
        assert set(query_vars) == expected_vars, name
        for var_name, var in query_vars.items():
            query = parse_label_values(var["query"])
            assert query.label == ("job_id" if var_name == "job" else var_name)
            assert query.metric in exposed | {"up"}, (name, var_name)
            assert var["datasource"]["uid"] == "${datasource}"
            if var["includeAll"]:
                assert var["allValue"] == ".*", "All must also match series without the label"


def test_every_query_is_limited_to_the_cluster_variable() -> None:
    """Each series selector of each panel carries cluster=~"$cluster", and every aggregation and match keeps
    `cluster`, so a global view shows the chosen clusters, each apart."""
    for name, dashboard in load_dashboards().items():
        cluster = variables(dashboard)["cluster"]
        assert cluster["multi"] and cluster["includeAll"] and cluster["allValue"] == ".*", name
        assert parse_label_values(cluster["query"]).label == "cluster"
        for var_name, var in variables(dashboard).items():
            if var["type"] == "query" and var_name != "cluster":
                assert 'cluster=~"$cluster"' in var["query"], (name, var_name)
        for title, expr in iter_queries(dashboard):
            unscoped = re.sub(r'[A-Za-z_:][\w:]*\{cluster=~"\$cluster"[^}]*\}', " ", expr)
            assert metric_names(unscoped) == set(), (name, title, expr)
            for clause in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr):
                assert "cluster" in clause, (name, title, expr)
            assert not re.search(r"\b(?:sum|max|min|avg|count|topk|bottomk)\s*\(", expr), (name, title, expr)


def _query_problems(dashboards: dict[str, dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(dashboard, panel) -> what :func:`clause_problems` finds in its queries, read as dashboard queries."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, dashboard in dashboards.items():
        for title, expr in iter_queries(dashboard):
            if problems := clause_problems(expr, dashboard=True):
                found.setdefault((name, title), []).extend(problems)
    return found


def test_no_query_matches_or_aggregates_across_clusters() -> None:
    """The rules' static check (issue 56) over every panel query, read as the global store answers it: no `by ()`,
    no `on (...)` without `cluster`, and no fleet constant nor `on ()`, which the global store can hold once per
    cluster (the rules at the edge) where the rules see one; so a panel never adds two clusters together nor meets
    two series per key, on every documented topology."""
    assert _query_problems(load_dashboards()) == {}


#: The overview's "Busy but not reporting" table as it was: the grace matched `on ()` in the panel, which returned
#: nothing on a global store fed by Prometheus servers that ran the rules (one grace per cluster there).
OLD_GRACE_QUERY = (
    'job_id:mfumon_job_gpus_unreported:max{cluster=~"$cluster"} and on (cluster, job_id) '
    '(job_id:mfumon_job_unreported_seconds:sum1d{cluster=~"$cluster"} > on () group_left () '
    "cluster:mfumon_unreported_grace_seconds:effective)"
)


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        (OLD_GRACE_QUERY, "on () in a dashboard"),
        (OLD_GRACE_QUERY, "reads the fleet constant cluster:mfumon_unreported_grace_seconds:effective"),
        # matched on cluster: no series centrally, where the global ruler records the grace without one
        ('a{cluster=~"$cluster"} > on (cluster) cluster:mfumon_unreported_grace_seconds:effective', "fleet constant"),
        # a constant aggregated away: fine in a rule, the sum of every cluster's copy on the global store
        ('a{cluster=~"$cluster"} > scalar(max(kind:mfumon_job_mfu_threshold_ratio:default))', "every cluster"),
    ],
)
def test_query_check_finds_a_planted_constant_match(expr: str, problem: str) -> None:
    assert any(problem in found for found in clause_problems(expr, dashboard=True)), clause_problems(expr)


def test_query_check_reports_the_old_grace_table_planted_in_a_board() -> None:
    """The old form put back into the overview's table is reported, there and only there; the rules' check (where a
    constant is one series) lets it through, and the dashboard generator refuses to write it."""
    dashboards = load_dashboards()
    overview = dashboards["mfumon-cluster-overview.json"]
    (panel,) = [p for p in iter_panels(overview) if p["title"] == "Busy but not reporting: jobs"]
    new = 'job_id:mfumon_job_gpus_unreported:max{cluster=~"$cluster"} and on (cluster, job_id) '
    new += 'job_id:mfumon_job_unreported_seconds:sum1d_over_grace{cluster=~"$cluster"}'
    assert new in panel["targets"][0]["expr"]
    panel["targets"][0]["expr"] = panel["targets"][0]["expr"].replace(new, OLD_GRACE_QUERY)
    assert list(_query_problems(dashboards)) == [("mfumon-cluster-overview.json", "Busy but not reporting: jobs")]
    assert clause_problems(OLD_GRACE_QUERY) == []
    sys.path.insert(0, str(GRAFANA_DIR))
    try:
        from _cluster import scoped
    finally:
        sys.path.remove(str(GRAFANA_DIR))
    unscoped = "x and on (job_id) (y > on () group_left () cluster:mfumon_unreported_grace_seconds:effective)"
    with pytest.raises(ValueError, match=r"on \(\)|fleet constant"):
        scoped(unscoped)
    with pytest.raises(ValueError, match="fleet constant"):
        scoped("y > on (job_id) cluster:mfumon_unreported_grace_seconds:effective")


def test_inference_board_says_what_each_serving_number_is() -> None:
    """Every panel says what its number is; a goodput is said to be a lower bound wherever one is shown; latencies
    are drawn against the job's own target; the serving waterfall shows every category the aggregator exports."""
    dashboard = load_dashboards()["mfumon-inference.json"]
    panels = {panel["title"]: panel for panel in iter_panels(dashboard)}
    for title, panel in panels.items():
        assert panel["description"].strip(), title
        exprs = " ".join(t["expr"] for t in panel["targets"])
        if "slo_goodput" in exprs:
            assert "lower bound" in panel["description"], title
    for measure, title in (("ttft", "TTFT p90 and p99 vs target"), ("tpot", "TPOT p90 and p99 vs target")):
        exprs = [t["expr"] for t in panels[title]["targets"]]
        assert any(f'measure="{measure}", quantile="0.9"' in e for e in exprs), title
        assert any(f'measure="{measure}", quantile="0.99"' in e for e in exprs), title
        assert any(
            f'mfumon_job_slo_target_seconds{{cluster=~"$cluster", job_id=~"$job", target="{measure}"}}' in e
            for e in exprs
        ), title
    (by_job,) = [p for t, p in panels.items() if t.startswith("Serving waterfall by job")]
    columns = by_job["transformations"][1]["options"]["renameByName"].values()
    assert [c for c in columns if c != "GPU-hours"] == list(SERVING_CATEGORIES)
    shares = panels["Serving waterfall over the range (share)"]["targets"][0]["expr"]
    assert "mfumon_job_serving_gpu_seconds_total" in shares and "$__range" in shares


def test_required_panels_exist() -> None:
    titles = {name: {p["title"] for p in iter_panels(d)} for name, d in load_dashboards().items()}
    assert {"Cluster MFU", "Achieved vs peak FLOP/s", "Idle GPUs", "Wasted GPU-hours (24h)", "Worst jobs by MFU"} <= (
        titles["mfumon-cluster-overview.json"]
    )
    assert {
        "MFU against baseline and alert threshold",
        "Throughput",
        "Step time breakdown",
        "Tensor-core activity per GPU",
        "SM activity per GPU",
    } <= titles["mfumon-job-drilldown.json"]
    assert {
        "SM active",
        "Power",
        "Temperature",
        "Memory used",
        "NVLink throughput",
        "XID and uncorrectable ECC errors",
    } <= (titles["mfumon-nodes-gpus.json"])
    assert {"Resource satisfaction", "GPUs requested vs allocated", "Pending jobs"} <= titles["mfumon-pools.json"]
    assert {
        "Tokens/s by phase",
        "MFU by phase",
        "MBU",
        "Running and waiting requests",
        "Batch size",
        "KV cache use",
    } <= titles["mfumon-inference.json"]
    # Serving jobs (issue 55): what users get (SLO goodput, latency against the targets) and the serving waterfall.
    assert {
        "SLO goodput per job (lower bound, upper bound, objective)",
        "SLO goodput per pool (lower bound)",
        "Goodput rate vs request rate",
        "TTFT p90 and p99 vs target",
        "TPOT p90 and p99 vs target",
        "KV cache pressure: use and preemptions",
        "Serving GPUs by category (selected jobs)",
        "Serving waterfall over the range (share)",
        "Serving waterfall by job (share of its GPU-hours over the range)",
    } <= titles["mfumon-inference.json"]
    assert {
        "Nodes to drain, with the reason",
        "Failing checks",
        "NVLink errors per second",
        "Remapped rows and pending remaps",
        "Link down events",
        "Idle GPU power by pool",
        "Idle GPU-hours by pool (24h)",
        "Faults per 1,000 GPU-months (7d) by pool",
    } <= titles["mfumon-fleet-health.json"]
    assert {
        "Resource satisfaction by pool",
        "Longest wait of a queued job",
        "Queue wait of jobs that started (1h)",
        "Quota use",
        "Nodes by free GPUs",
        "Largest free block vs free GPUs",
        "Fragmented GPUs",
    } <= titles["mfumon-capacity.json"]
    # Cluster truth (issue 8): where each number comes from, the cross-check, the GPUs busy without reports.
    assert {
        "GPUs by state",
        "Reported coverage (5m)",
        "Unverified GPUs",
        "MFU cross-check: reported vs hardware",
        "Busy but not reporting: jobs",
        "Busy but not reporting: GPUs with no job id",
    } <= titles["mfumon-cluster-overview.json"]
    assert {"Hardware MFU (estimate)", "Reported / hardware MFU", "MFU against the hardware estimate"} <= titles[
        "mfumon-job-drilldown.json"
    ]
    assert {"GPUs by state", "Reported coverage"} <= titles["mfumon-pools.json"]
    # Where the GPU-hours go (issue 11): waterfalls over the chosen range, goodput, top wasters; the job's own.
    assert {
        "GPU-hours",
        "Goodput",
        "Waterfall (GPU-hours)",
        "GPUs by category",
        "GPU-hours by pool and category",
        "Goodput and MFU by pool",
        "GPU-hours by team and category",
        "Goodput and MFU by team",
        "Jobs that wasted most (GPU-hours not computing)",
    } <= titles["mfumon-gpu-hours.json"]
    assert {"Goodput", "Job waterfall (GPU-hours, its life)", "Job GPUs by category", "Tensor-activity spread"} <= (
        titles["mfumon-job-drilldown.json"]
    )
    assert "Hardware MFU estimate" in titles["mfumon-nodes-gpus.json"]
    # NCCL Inspector per job (issue 61): what the node agents read of the job's collectives, by process group, and
    # per rank: the ranks the others wait for, the weakest links.
    assert {
        "Collective bus bandwidth by group",
        "Time in collectives by group",
        "Collective GPU-seconds per second by collective",
        "Inspector records lost per second",
        "Ranks their peers wait for",
        "Weakest links against the fabric",
    } <= titles["mfumon-job-drilldown.json"]


def _top_level(expr: str) -> str:
    """`expr` with everything inside parentheses left out."""
    depth, out = 0, []
    for char in expr:
        depth += char == "("
        out.append(char if depth == 0 else "")
        depth -= char == ")"
    return "".join(out)


def test_info_joins_apply_to_the_whole_expression() -> None:
    """A table that joins a job's name, team and pool joins the whole expression: `*` binds tighter than `and`, `or`
    and `unless`, so `a and b * on (...) group_left (name, team, pool) info` returns `a` without those columns."""
    joins = 0
    for name, dashboard in load_dashboards().items():
        for title, expr in iter_queries(dashboard):
            for match in re.finditer(r"\*\s*on\s*\([^)]*\)\s*group_left\s*\(name, team, pool\)", expr):
                joins += 1
                left = _top_level(expr[: match.start()])
                assert not re.search(r"\b(?:and|or|unless)\b", left), (name, title, expr)
    assert joins >= 8


def test_job_gpu_panels_join_through_gpu_info() -> None:
    dashboard = load_dashboards()["mfumon-job-drilldown.json"]
    for title in ("Tensor-core activity per GPU", "SM activity per GPU"):
        (per_gpu, *_) = [expr for t, expr in iter_queries(dashboard) if t == title]
        assert 'mfumon_gpu_info{cluster=~"$cluster", job_id="$job"}' in per_gpu
        assert "on (cluster, node, gpu, uuid)" in per_gpu


def test_queries_use_only_exposed_metrics_and_recording_rules() -> None:
    known = exposed_metric_names() | recorded_names() | {"up"}  # up: the window growth (grafana/_window.py)
    for name, dashboard in load_dashboards().items():
        for title, expr in iter_queries(dashboard):
            names = metric_names(fill_variables(expr, SAMPLE_VALUES))
            assert names, (name, title, "selects no metric")
            assert names <= known, (name, title, names - known)


@pytest.mark.prometheus
def test_queries_parse_as_promql(promtool: str, tmp_path: Path) -> None:
    """promtool parses every query (variables filled in) as a recording rule expression."""
    rules = [
        {"record": f"dashboard:query_{i}:test", "expr": fill_variables(expr, SAMPLE_VALUES)}
        for i, (_, expr) in enumerate(q for d in load_dashboards().values() for q in iter_queries(d))
    ]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_provisioning_points_at_the_dashboards_and_prometheus() -> None:
    datasources = yaml.safe_load((GRAFANA_DIR / "provisioning" / "datasources" / "mfumon-prometheus.yaml").read_text())
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus" and source["uid"] == "mfumon-prometheus"
    assert source["url"] == "http://prometheus:9090"
    providers = yaml.safe_load((GRAFANA_DIR / "provisioning" / "dashboards" / "mfumon.yaml").read_text())
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    mounts = compose_mounts(compose["services"]["grafana"])
    assert (DEPLOY / mounts[provider["options"]["path"]]).resolve() == DASHBOARDS_DIR
    assert (DEPLOY / mounts["/etc/grafana/provisioning"]).resolve() == GRAFANA_DIR / "provisioning"
