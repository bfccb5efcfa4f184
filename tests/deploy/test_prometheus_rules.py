"""The Prometheus configuration and rules: promtool's checks and unit tests, and the conventions they follow."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy._support import (
    AGGREGATOR_JOB,
    OVERRIDE_SERIES,
    PROMETHEUS_DIR,
    RULE_TESTS_DIR,
    RULES_DIR,
    RUNBOOK_BASE_URL,
    RUNBOOKS_DIR,
    alert_rules,
    all_rules,
    exposed_metric_names,
    metric_names,
    prometheus_copy_with_broken_rule,
    recorded_names,
)

RECORDING_NAME = re.compile(r"^[a-z_]+:mfumon_[a-z0-9_]+:[a-z0-9_]+$")
SEVERITIES = {"critical", "warning", "info"}


def _promtool(promtool: str, *args: str, cwd: Path = PROMETHEUS_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.prometheus
def test_promtool_accepts_the_config_and_rules(promtool: str) -> None:
    config = _promtool(promtool, "check", "config", "prometheus.yml")
    assert config.returncode == 0, config.stdout + config.stderr
    rule_files = sorted(str(p.relative_to(PROMETHEUS_DIR)) for p in RULES_DIR.glob("*.yml"))
    rules = _promtool(promtool, "check", "rules", *rule_files)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert rules.stdout.count("SUCCESS") == len(rule_files)


@pytest.mark.prometheus
def test_promtool_unit_tests_pass(promtool: str) -> None:
    test_files = sorted(str(p.relative_to(PROMETHEUS_DIR)) for p in RULE_TESTS_DIR.glob("*.yml"))
    assert len(test_files) >= 2
    result = _promtool(promtool, "test", "rules", *test_files)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("rules_file", "old", "new"),
    [
        ("mfumon-thresholds.yml", "vector(600)", "vector(0)"),  # no warm-up: young jobs would page
        ("mfumon-alerts.yml", "for: 15m", "for: 5m"),  # short dips would page
        ("mfumon-thresholds.yml", "vector(0.10)", "vector(0.30)"),  # inference judged by the training bar
        ("mfumon-cluster-truth.yml", "ratio:avg10m > 1.2)", "ratio:avg10m > 2.0)"),  # a 1.6x over-claim passes
        ("mfumon-cluster-truth.yml", "ratio:avg10m < 0.5)", "ratio:avg10m < 0.3)"),  # a 0.4x under-count passes
        ("mfumon-cluster-truth.yml", "expr: vector(1800)", "expr: vector(60)"),  # busy GPUs flagged after a minute
        # Replicas' counters added up: held time doubled.
        ("mfumon-cluster-truth.yml", "max by (cluster, job_id, kind) ((", "sum by (cluster, job_id, kind) (("),
        ("mfumon-cluster-truth.yml", "max by (cluster, node) ((", "sum by (cluster, node) (("),
        # A durable counter's growth read with increase(): extrapolated, it no longer matches the exact figures.
        (
            "mfumon-recording.yml",
            'or (mfumon_cluster_gpu_seconds_total{category="idle"}'
            ' - min_over_time(mfumon_cluster_gpu_seconds_total{category="idle"}[1h]))',
            'or increase(mfumon_cluster_gpu_seconds_total{category="idle"}[1h])',
        ),
        # A series born inside the window counted from its first sample, as Prometheus' increase() does.
        ("mfumon-recording.yml", "group_left () sum_over_time(up[1h])", "group_left () (sum_over_time(up[1h]) * 0)"),
        ("mfumon-goodput.yml", "for: 15m", "for: 5m"),  # a straggler for 10 minutes would page
        ("mfumon-health.yml", "for: 15m", "for: 5m"),  # a PCIe link caught mid-change for 10 minutes would page
        # one replica's view of a downtrained link is enough: pages before every replica sees it
        (
            "mfumon-health.yml",
            "max by (cluster, node, gpu, uuid) (mfumon_gpu_health",
            "min by (cluster, node, gpu, uuid) (mfumon_gpu_health",
        ),
        ("mfumon-goodput.yml", "max by (cluster, job_id, category)", "sum by (cluster, job_id, category)"),  # replicas
        ("mfumon-recording.yml", 'category!~"idle|unreported"', 'category!="idle"'),  # unreported GPUs as waste
    ],
)
def test_promtool_unit_tests_catch_a_broken_rule(
    promtool: str, tmp_path: Path, rules_file: str, old: str, new: str
) -> None:
    """The unit tests are not vacuous: loosening a rule the way a careless edit would makes them fail."""
    copy = prometheus_copy_with_broken_rule(tmp_path, rules_file, old, new)
    tests = sorted(str(p.relative_to(copy)) for p in (copy / "tests").glob("*.yml"))
    result = _promtool(promtool, "test", "rules", *tests, cwd=copy)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def test_alerts_carry_severity_summary_description_and_a_runbook() -> None:
    alerts = alert_rules()
    assert len(alerts) >= 12
    names = [rule["alert"] for rule in alerts]
    assert len(names) == len(set(names))
    for rule in alerts:
        name = rule["alert"]
        assert re.fullmatch(r"Mfumon[A-Z][A-Za-z]+", name), name
        severity = rule["labels"]["severity"]  # a template may pick it from the value: every choice must be valid
        choices = set(re.findall(r"[a-z]+", re.sub(r"\{\{.*?\}\}", " ", severity)))
        assert choices and choices <= SEVERITIES, name
        annotations = rule["annotations"]
        assert annotations["summary"].strip() and annotations["description"].strip(), name
        assert annotations["runbook_url"] == f"{RUNBOOK_BASE_URL}{name}.md", name
        runbook = RUNBOOKS_DIR / f"{name}.md"
        assert runbook.is_file(), f"missing runbook {runbook}"
        assert runbook.read_text().startswith(f"# {name}\n"), runbook


def test_every_runbook_belongs_to_an_alert() -> None:
    names = {rule["alert"] for rule in alert_rules()}
    pages = {p.stem for p in RUNBOOKS_DIR.glob("*.md")} - {"README"}
    assert pages == names
    index = (RUNBOOKS_DIR / "README.md").read_text()
    assert all(f"[{name}.md]({name}.md)" in index for name in names)


def test_required_alerts_exist_and_watch_the_right_metrics() -> None:
    """The alerts issue 5 asks for, each on the metric that defines it."""
    exprs = {rule["alert"]: rule["expr"] for rule in alert_rules()}
    expected = {
        "MfumonTrainingMFULow": ['kind="training"', "job_id:mfumon_job_mfu_threshold_ratio:effective"],
        "MfumonInferenceMFULow": ['kind="inference"', "job_id:mfumon_job_mfu_threshold_ratio:effective"],
        "MfumonGPUsBusyButMFULow": ["job_id:mfumon_gpu_utilization_ratio:avg"],
        "MfumonCommRatioHigh": ["job_id:mfumon_job_comm_ratio:max"],
        "MfumonMFUBelowBaseline": ["job_id:mfumon_job_baseline_mfu_ratio:max"],
        "MfumonPoolSatisfactionLow": ["pool:mfumon_resource_satisfaction_ratio:max"],
        "MfumonExporterSilent": ["time() -", "mfumon_node_last_seen_timestamp_seconds"],
        "MfumonAggregatorDown": [f'up{{job="{AGGREGATOR_JOB}"}} == 0', f'absent(up{{job="{AGGREGATOR_JOB}"}})'],
        "MfumonGPUXidErrors": ["increase(mfumon_gpu_xid_errors_total"],
        "MfumonGPUThermalThrottling": ['mfumon_gpu_throttled{reason="thermal"}'],
        "MfumonGPUEccUncorrectable": ["mfumon_gpu_ecc_uncorrected_total"],
        "MfumonInferenceBadlyBatched": [
            "job_id:mfumon_job_mbu_ratio:max",
            "job_id:mfumon_job_requests_waiting:max > 0",
            "job_id:mfumon_job_mbu_threshold_ratio:effective",
        ],
        "MfumonInferencePrefillMFULow": [
            'job_id:mfumon_job_phase_active_mfu_ratio:max{phase="prefill"}',
            "job_id:mfumon_job_prefill_mfu_threshold_ratio:effective",
        ],
        "MfumonInferenceKVCacheSaturated": [
            "job_id:mfumon_job_kv_cache_usage_ratio:max",
            "job_id:mfumon_job_requests_waiting:max > 0",
        ],
        "MfumonNodeDrain": ["node:mfumon_node_drain:max", "node:mfumon_node_info:topk1"],
        "MfumonGPUPcieDowntrained": [
            'mfumon_gpu_health{check="pcie_downtrained"}) == 0',
            "node:mfumon_node_info:topk1",
        ],
        "MfumonMFUAccountingSuspect": ["job_id:mfumon_job_mfu_hardware_agreement_ratio:avg10m > 1.2", "< 0.5"],
        "MfumonGPUsBusyNotReporting": [
            "job_id:mfumon_job_unreported_seconds:sum1d_over_grace",
            "node:mfumon_unattributed_busy_seconds:sum1d_over_grace",
        ],
    }
    for name, fragments in expected.items():
        for fragment in fragments:
            assert fragment in exprs[name], (name, fragment)
    # Past the grace is recorded where the rules run, the seconds against the grace in force.
    recorded = {rule["record"]: rule["expr"] for rule in all_rules() if "record" in rule}
    for over, seconds in (
        ("job_id:mfumon_job_unreported_seconds:sum1d_over_grace", "job_id:mfumon_job_unreported_seconds:sum1d"),
        ("node:mfumon_unattributed_busy_seconds:sum1d_over_grace", "node:mfumon_unattributed_busy_seconds:sum1d"),
    ):
        grace = "cluster:mfumon_unreported_grace_seconds:effective"
        assert recorded[over].split() == [seconds, ">", "on", "()", "group_left", "()", grace], over
    warming = (
        "MfumonTrainingMFULow",
        "MfumonInferenceMFULow",
        "MfumonGPUsBusyButMFULow",
        "MfumonCommRatioHigh",
        "MfumonMFUAccountingSuspect",
    )
    serving = ("MfumonInferenceBadlyBatched", "MfumonInferencePrefillMFULow", "MfumonInferenceKVCacheSaturated")
    for name in warming + serving:
        assert "cluster:mfumon_job_warmup_seconds:default" in exprs[name], f"{name} must skip warm-up"
    for name in ("MfumonInferenceMFULow", "MfumonGPUsBusyButMFULow"):  # serving jobs with MBU are judged by it
        assert re.search(r"unless on \(cluster, job_id\)\s+job_id:mfumon_job_mbu_ratio:max", exprs[name]), name


def test_goodput_alerts_watch_the_waterfall_and_the_straggler_gauges() -> None:
    """Issue 11's alerts: goodput and checkpoint overhead from the waterfall counters over a window, stragglers from
    the spread and the step-time deviation; all skip warm-up."""
    exprs = {rule["alert"]: rule["expr"] for rule in alert_rules()}
    recorded = {rule["record"]: rule["expr"] for rule in all_rules() if "record" in rule}
    expected = {
        "MfumonJobGoodputLow": ["job_id:mfumon_job_goodput_ratio:ratio1h < 0.7"],
        "MfumonJobCheckpointOverheadHigh": ["job_id:mfumon_job_checkpoint_overhead_ratio:ratio1h > 0.1"],
        "MfumonJobStraggler": [
            "job_id:mfumon_job_gpu_tensor_active_spread_ratio:max > 0.2",
            "job_id:mfumon_job_step_time_deviation_ratio:max > 0.2",
        ],
    }
    for name, fragments in expected.items():
        assert "cluster:mfumon_job_warmup_seconds:default" in exprs[name], f"{name} must skip warm-up"
        for fragment in fragments:
            assert fragment in exprs[name], (name, fragment)
    for name in ("job_id:mfumon_job_goodput_ratio:ratio1h", "job_id:mfumon_job_checkpoint_overhead_ratio:ratio1h"):
        assert "min_over_time(mfumon_job_gpu_seconds_total" in recorded[name], name


def test_recording_rules_follow_level_metric_operations() -> None:
    names = [rule["record"] for rule in all_rules() if "record" in rule]
    for name in names:
        assert RECORDING_NAME.match(name), name
    for level in ("cluster", "pool", "team"):
        for window in ("5m", "1h", "1d"):
            assert f"{level}:mfumon_mfu_ratio:avg{window}" in names
    for name in ("cluster:mfumon_gpus_idle:max", "cluster:mfumon_idle_gpu_seconds:sum1d"):
        assert name in names
    assert "cluster:mfumon_wasted_gpu_seconds:sum1d" in names


def test_window_sums_read_counters_not_every_sample() -> None:
    """Idle and wasted GPU-seconds over an hour or a day come from the growth of the durable counters (a few series
    per cluster): a day-long *_over_time of a per-GPU gauge would read every GPU's samples of the day at every
    evaluation (costly at 100,000 GPUs)."""
    recorded = {rule["record"]: rule["expr"] for rule in all_rules() if "record" in rule}
    windows = [n for n in recorded if n.split(":")[1] in ("mfumon_idle_gpu_seconds", "mfumon_wasted_gpu_seconds")]
    assert len(windows) == 6
    for name in windows:
        scanned = set(re.findall(r"_over_time\(([a-z_:]+)", recorded[name]))
        assert scanned and all(n == "up" or n.endswith("_total") for n in scanned), (name, scanned)


def test_prometheus_yml_names_its_cluster() -> None:
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    assert config["global"]["external_labels"]["cluster"]


def test_rules_read_only_metrics_the_aggregator_exposes() -> None:
    known = exposed_metric_names() | recorded_names() | OVERRIDE_SERIES | {"up"}
    for rule in all_rules():
        unknown = metric_names(rule["expr"]) - known
        assert not unknown, (rule.get("record") or rule.get("alert"), unknown)


def test_every_rule_is_covered_by_a_promtool_unit_test() -> None:
    """Each alert is shown both firing and quiet; each recording rule's output is checked."""
    tests = [t for p in sorted(RULE_TESTS_DIR.glob("*.yml")) for t in yaml.safe_load(p.read_text())["tests"]]
    alert_cases = [case for t in tests for case in t.get("alert_rule_test", [])]
    for name in {rule["alert"] for rule in alert_rules()}:
        cases = [case for case in alert_cases if case["alertname"] == name]
        assert any(case["exp_alerts"] for case in cases), f"{name} never shown firing"
        assert any(not case["exp_alerts"] for case in cases), f"{name} never shown quiet"
    checked = " ".join(case["expr"] for t in tests for case in t.get("promql_expr_test", []))
    for name in recorded_names():
        assert re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", checked), f"{name} has no promql_expr_test"


def test_prometheus_yml_scrapes_the_aggregator_and_exporters() -> None:
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs[AGGREGATOR_JOB]["metrics_path"] == "/metrics"
    assert jobs[AGGREGATOR_JOB]["static_configs"][0]["targets"] == ["aggregator:8000"]
    exporter_sd = jobs["mfumon-exporter"]["file_sd_configs"][0]["files"]
    assert any(PROMETHEUS_DIR.glob(pattern) for pattern in exporter_sd)
    assert config["rule_files"] == ["rules/*.yml"]
    targets = yaml.safe_load((PROMETHEUS_DIR / "targets" / "mfumon-exporter.yml").read_text())
    assert targets == []
    assert ":9428" in (PROMETHEUS_DIR / "targets" / "mfumon-exporter.yml").read_text()
