"""Every rule keeps clusters apart: the unit tests rerun with two clusters' series, and every clause read statically."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy._support import (
    OVERRIDE_SERIES,
    RULE_TESTS_DIR,
    all_rules,
    documented_central_relabelling,
    exposed_metric_names,
    prometheus_copy,
    prometheus_copy_with_broken_rule,
    recorded_names,
)
from tests.deploy._two_clusters import (
    clause_problems,
    expr_target,
    is_fleet_constant,
    two_cluster_suite,
    with_cluster,
)


def _run_suite(promtool: str, prometheus_dir: Path) -> subprocess.CompletedProcess[str]:
    suite = two_cluster_suite(prometheus_dir / "tests", prometheus_dir / "tests-two-clusters")
    files = [str(r.path.relative_to(prometheus_dir)) for r in suite]
    return subprocess.run(
        [promtool, "test", "rules", *files], cwd=prometheus_dir, capture_output=True, text=True, timeout=300
    )


def test_with_cluster_adds_the_label() -> None:
    assert with_cluster('m{instance="a",job_id="j1"}', "b") == 'm{cluster="b",instance="a",job_id="j1"}'
    assert with_cluster("cluster:mfumon_wasted_gpus:sum", "a") == 'cluster:mfumon_wasted_gpus:sum{cluster="a"}'
    assert with_cluster('{__name__="up"}', "a") == '{cluster="a",__name__="up"}'


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("max by (job_id) (mfumon_job_mfu_ratio)", "drops cluster"),
        ("sum(job_id:mfumon_wasted_gpus:max)", "aggregates every cluster"),
        ("a * on (job_id) group_left (pool) b", "matches across clusters"),
        ("sum without (cluster, instance) (mfumon_pool_gpus)", "drops cluster"),
        ("a / ignoring (cluster) b", "matches across clusters"),
        # `on ()` with anything but a fleet constant: one cluster's series against every cluster's
        ("a > on () group_left () job_id:mfumon_job_unreported_seconds:sum1d", "matches across clusters"),
        ("max(cluster:mfumon_unreported_grace_seconds:override) or on () x", "matches across clusters"),
        ("a + on (kind) group_left () max by (cluster, kind) (job_id:mfumon_job_mfu_ratio:max)", "across clusters"),
        ("cluster:mfumon_job_warmup_seconds:default < on () group_right () a", "group_right"),
    ],
)
def test_clause_check_finds_a_mixing_clause(expr: str, problem: str) -> None:
    problems = clause_problems(expr)
    assert problems and problem in problems[0]


def test_clause_check_allows_fleet_constants_and_cluster_clauses() -> None:
    assert clause_problems("max by (cluster, job_id) (m) * on (cluster, job_id) group_left () n") == []
    grace = "max(cluster:mfumon_unreported_grace_seconds:override) or on () cluster:mfumon_unreported_grace_seconds"
    grace += ":default"
    assert clause_problems(grace) == []
    assert clause_problems("a > on () group_left () cluster:mfumon_job_warmup_seconds:default") == []
    threshold = "a + on (kind) group_left () max by (kind) (kind:mfumon_job_mfu_threshold_ratio:default)"
    assert clause_problems(threshold) == []
    assert clause_problems('x{job="sum by (y)"}') == []  # inside a string: not a clause


def test_every_rule_keeps_cluster_in_every_clause() -> None:
    """Each aggregation and vector match of each shipped rule names `cluster`, except where it matches a fleet
    constant `on ()` (or `on (kind)`): where the rules run, the constant is one series."""
    rules = all_rules()
    assert len(rules) >= 80
    problems = {
        rule.get("record") or rule.get("alert"): found for rule in rules if (found := clause_problems(rule["expr"]))
    }
    assert problems == {}


def test_documented_central_relabelling_drops_what_the_edges_record_and_alert_only() -> None:
    """The relabelling docs/operators/deploy.md gives each cluster's Prometheus when the rules run centrally (and
    test_global_view applies): every recorded series and the alerts' series stay home; every raw series goes."""
    (rule,) = documented_central_relabelling()
    assert rule["action"] == "drop" and rule["source_labels"] == ["__name__"]
    dropped = re.compile(f"^(?:{rule['regex']})$")  # Prometheus anchors relabel regexes
    assert all(dropped.match(name) for name in [*recorded_names(), *OVERRIDE_SERIES, "ALERTS", "ALERTS_FOR_STATE"])
    raw = exposed_metric_names() | {"up", "scrape_duration_seconds"}
    assert not [name for name in sorted(raw) if dropped.match(name)]


def test_generated_suite_covers_every_recorded_series_and_alert() -> None:
    """The rewritten tests check, per cluster, every series the rules record and every alert (fleet constants
    once): a rule no test reaches would escape the two-cluster run."""
    covered_series: set[str] = set()
    covered_alerts: set[str] = set()
    for path in RULE_TESTS_DIR.glob("*.test.yml"):
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("promql_expr_test") or []:
                target = expr_target(case["expr"])
                if target is not None and case.get("exp_samples"):
                    covered_series.add(target.split("{")[0])
            covered_alerts |= {c["alertname"] for c in group.get("alert_rule_test") or []}
    recorded = recorded_names()
    missing = {n for n in recorded if n not in covered_series and not is_fleet_constant(n)}
    assert missing == set()
    alerts = {r["alert"] for r in all_rules() if "alert" in r}
    assert alerts - covered_alerts == set()


@pytest.mark.prometheus
def test_rules_evaluate_per_cluster_on_two_clusters_series(promtool: str, tmp_path: Path) -> None:
    copy = prometheus_copy(tmp_path)
    suite = two_cluster_suite(copy / "tests", copy / "tests-two-clusters")
    assert sum(r.expectations for r in suite) >= 200
    result = _run_suite(promtool, copy)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("rules_file", "old", "new"),
    [
        # an aggregation that forgets cluster: one sample for both clusters
        (
            "mfumon-recording.yml",
            "(cluster, job_id, kind) (mfumon_job_mfu_ratio",
            "(job_id, kind) (mfumon_job_mfu_ratio",
        ),
        # a join that forgets cluster: two clusters' info series per job_id, many-to-many
        ("mfumon-goodput.yml", "* on (cluster, job_id) group_left (name,", "* on (job_id) group_left (name,"),
        # a cluster total that sums both clusters
        ("mfumon-recording.yml", "sum by (cluster) (job_id:mfumon_wasted_gpus", "sum(job_id:mfumon_wasted_gpus"),
        # the fault rate divided by the whole fleet's GPUs
        ("mfumon-health.yml", "/ (sum by (cluster) (avg_over_time", "/ (sum(avg_over_time"),
    ],
)
def test_two_cluster_run_fails_on_a_rule_that_mixes_clusters(
    promtool: str, tmp_path: Path, rules_file: str, old: str, new: str
) -> None:
    copy = prometheus_copy_with_broken_rule(tmp_path, rules_file, old, new, count=1)
    single = subprocess.run(
        [promtool, "test", "rules", *(str(p.relative_to(copy)) for p in sorted((copy / "tests").glob("*.yml")))],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert single.returncode == 0, "the one-cluster tests cannot see this mistake: " + single.stdout[-2000:]
    result = _run_suite(promtool, copy)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr
