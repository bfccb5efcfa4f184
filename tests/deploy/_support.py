"""What the deployment tests share: repository paths, the rule files, dashboard queries, PromQL name parsing, a copy
of deploy/prometheus with one rule broken, and for the live tests a simulated cluster, the rules with shortened
timings, a real Prometheus and the queries put to it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from mfumon.api.metrics import families
from mfumon.exporter.demo import prometheus as demo_prometheus
from mfumon.exporter.demo.cli import run_simulation
from mfumon.exporter.demo.prices import write_demo_prices
from mfumon.exporter.demo.simcluster import ClusterSpec, default_cluster
from tests.conftest import stop_process, wait_for_listening

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
RULES_DIR = PROMETHEUS_DIR / "rules"
RULE_TESTS_DIR = PROMETHEUS_DIR / "tests"
KUBERNETES_DIR = DEPLOY / "kubernetes"
RUNBOOKS_DIR = DEPLOY / "runbooks"
GRAFANA_DIR = REPO / "grafana"
DASHBOARDS_DIR = GRAFANA_DIR / "dashboards"

RUNBOOK_BASE_URL = "https://github.com/mfu-monitor/mfu-monitor/blob/main/deploy/runbooks/"
AGGREGATOR_JOB = "mfumon-aggregator"

#: Recording-rule names that operators define in their own rule files (threshold overrides): referenced, never
#: recorded by the shipped rules.
OVERRIDE_SERIES = frozenset(
    {
        "job_id:mfumon_job_mfu_threshold_ratio:override",
        "kind:mfumon_job_mfu_threshold_ratio:override",
        "job_id:mfumon_job_mbu_threshold_ratio:override",
        "job_id:mfumon_job_prefill_mfu_threshold_ratio:override",
        "job_id:mfumon_job_kv_cache_usage_threshold_ratio:override",
        "cluster:mfumon_unreported_grace_seconds:override",
    }
)

_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACES = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_OFFSET = re.compile(r"\boffset\s+(?:-?(?:\d+(?:ms|[smhdwy]))+|\$\{?__range\}?)")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NUMBER = re.compile(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(r"^label_values\(\s*(?:([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?\s*,)?\s*(\w+)\s*\)$")

#: Jobs of :func:`live_cluster` the live tests (one cluster and two) expect alerts and panels of.
LOW_MFU_JOB = "finetune-13b-commbound"  # target MFU 0.20, below the 30% training threshold
HEALTHY_JOB = "pretrain-llama3-8b"  # target MFU 0.45, recomputes activations

INFERENCE_JOB = "serve-llama3-70b"  # target MFU 0.07
OVERCLAIM_JOB = "finetune-7b-overclaim"  # reports the 13b model while a 7b one runs: ~1.6x its hardware estimate
UNWRAPPED_JOB = "sweep-unwrapped-17"  # busy GPUs attributed to it, never reports
RESILIENT_JOB = "pretrain-3b-resilient"  # saves a third of its time, fails once and restarts
STRAGGLER_JOB = "pretrain-13b-straggler"  # one GPU at 60% of its clock sets the pace

#: The demo's nodes whose fleet-health faults :func:`live_cluster` brings within a live test's time.
FLAPPING_NODE = "gpu-h100-02"  # an InfiniBand link that flaps
REMAP_NODE = "gpu-a100-02"  # a GPU whose row remap waits for a reset
STRAY_NODE = "gpu-h100-02"  # one GPU runs work with no job id
DOWNTRAINED_GPU = ("gpu-h100-03", "2")  # an idle reserve GPU whose PCIe link trained at x8 of x16

#: Every alert with a simulated case in :func:`live_cluster`, and what it fires for there (see :func:`alert_subject`):
#: the one-cluster live test (test_prometheus_live) checks these on one Prometheus, the global-view test once per
#: cluster on the global store.
SIMULATED_ALERTS: dict[str, frozenset[str]] = {
    "MfumonTrainingMFULow": frozenset({LOW_MFU_JOB}),
    "MfumonInferenceMFULow": frozenset({INFERENCE_JOB}),  # 7% MFU: under its own 10% bar
    "MfumonInferenceBadlyBatched": frozenset({"serve-code-8b"}),  # 12% MBU, a queue, room in its KV cache
    "MfumonInferenceKVCacheSaturated": frozenset({"serve-rag-32b", "serve-agent-32b"}),  # 97-98% full, a queue
    "MfumonInferencePrefillMFULow": frozenset({"serve-rag-32b"}),  # prompts at 15% MFU while prefilling
    "MfumonMFUAccountingSuspect": frozenset({OVERCLAIM_JOB}),
    # the unwrapped job, the scheduler's sweeps, two time-sliced evaluation harnesses, and the stray GPU's node
    "MfumonGPUsBusyNotReporting": frozenset(
        {UNWRAPPED_JOB, "sweep-lr-a", "sweep-lr-b", "eval-harness-a", "eval-harness-b", STRAY_NODE}
    ),
    "MfumonNodeDrain": frozenset({FLAPPING_NODE, REMAP_NODE}),
    "MfumonGPUPcieDowntrained": frozenset({"/".join(DOWNTRAINED_GPU)}),
    "MfumonJobGoodputLow": frozenset({RESILIENT_JOB}),
    "MfumonJobCheckpointOverheadHigh": frozenset({RESILIENT_JOB}),
    "MfumonJobStraggler": frozenset({STRAGGLER_JOB}),
    "MfumonQueueWaitLong": frozenset({"train-h100"}),  # a job queued for 5 h
    "MfumonPoolFragmented": frozenset({"research-h100"}),  # a 4-GPU job that fits on no node
    # the demo's history (exporter/demo/history.py): NCCL 2.21.5 -> 2.23.4 cost 6 %; the driver upgrade nothing
    "MfumonSoftwareRegression": frozenset({"nccl 2.21.5 -> 2.23.4"}),
}


def unexpected_alerts(firing: list[Mapping[str, str]]) -> list[tuple[str, list[str]]]:
    """(alert, the subjects it fires for) of each alert of SIMULATED_ALERTS that does not fire for each of its
    subjects, or fires for others; `firing` are the firing alerts' labels."""
    out = []
    for alertname, subjects in sorted(SIMULATED_ALERTS.items()):
        got = {alert_subject(labels) for labels in firing if labels["alertname"] == alertname}
        if got != subjects:
            out.append((alertname, sorted(got)))
    return out


#: What :func:`write_shortened_rules` shortens: every alert's `for:`, and the warm-up and not-reporting grace series.
SHORT_FOR = "2s"
SHORTENED_SERIES = demo_prometheus.SHORTENED_SERIES
SHORT_WARMUP_S = 2

WAIT_S = 90.0
# Prometheus logs the address it bound, so "127.0.0.1:0" needs no port picked in advance.
_PROMETHEUS_LISTENING = re.compile(r'msg="Listening on"[^\n]*? address=(127\.0\.0\.1:\d+)')

T = TypeVar("T")


def require_tool(name: str, package: str = "prometheus") -> str:
    """Path of the executable `name` (from the Debian package `package`); skip without it, except in CI (env CI set),
    where a missing tool fails."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} not found on PATH (Debian/Ubuntu: apt-get install {package})"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must install it", pytrace=False)
        pytest.skip(message)
    return path


def exposed_metric_names() -> set[str]:
    """Every metric family the aggregator renders on /metrics (mfumon.api.metrics.families)."""
    names: set[str] = set()
    for value in vars(families).values():
        if isinstance(value, dict):
            for family in value.values():
                if isinstance(family, families.Family):
                    names.add(family.name)
                    if family.type == "histogram":
                        names |= {f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count")}
    return names


def load_rule_groups() -> list[dict[str, Any]]:
    """The groups of every shipped rules file, in file-name order."""
    groups: list[dict[str, Any]] = []
    for path in sorted(RULES_DIR.glob("*.yml")):
        groups.extend(yaml.safe_load(path.read_text())["groups"])
    return groups


def all_rules() -> list[dict[str, Any]]:
    return [rule for group in load_rule_groups() for rule in group["rules"]]


def recorded_names() -> set[str]:
    return {rule["record"] for rule in all_rules() if "record" in rule}


def alert_rules() -> list[dict[str, Any]]:
    return [rule for rule in all_rules() if "alert" in rule]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, labels and numbers left out)."""
    text = _STRING.sub(" ", expr)
    text = _BRACES.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _OFFSET.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        following = text[match.end() :].lstrip()
        if following.startswith("(") or match.group() in _KEYWORDS:
            continue
        names.add(match.group())
    return names


@dataclass(frozen=True)
class LabelValuesQuery:
    metric: str | None
    matchers: str
    label: str


def parse_label_values(query: str) -> LabelValuesQuery:
    """Split a Grafana `label_values(metric{...}, label)` variable query."""
    match = _LABEL_VALUES.match(query.strip())
    if match is None:
        raise ValueError(f"not a label_values() query: {query!r}")
    return LabelValuesQuery(match.group(1), match.group(2) or "", match.group(3))


def load_dashboards() -> dict[str, dict[str, Any]]:
    """File name -> dashboard JSON model."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS_DIR.glob("*.json"))}


def iter_panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that queries data (row headers skipped, panels nested in rows included)."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def iter_queries(dashboard: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL expression) of every query of every panel."""
    for panel in iter_panels(dashboard):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def dashboard_queries(values: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, query) of every panel query of every dashboard, its variables filled from
    `values`; on the inference dashboard `job` is `.*` (every serving job of the demo)."""
    per_dashboard = {"mfumon-inference.json": {**values, "job": ".*"}}
    return [
        (name, title, fill_variables(expr, per_dashboard.get(name, values)))
        for name, dashboard in load_dashboards().items()
        for title, expr in iter_queries(dashboard)
    ]


def variables(dashboard: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def compose_mounts(service: Mapping[str, Any]) -> dict[str, str]:
    """A compose service's volumes as container path -> host path (or volume name)."""
    mounts = {}
    for volume in service.get("volumes", []):
        host, container = volume.split(":")[:2]
        mounts[container] = host
    return mounts


def fill_variables(expr: str, values: Mapping[str, str], rate_interval: str = "1m") -> str:
    """Substitute dashboard variables (`$name`, `${name}`) and Grafana's interval macros."""
    for macro in ("$__rate_interval", "${__rate_interval}", "$__interval", "${__interval}"):
        expr = expr.replace(macro, rate_interval)
    expr = expr.replace("${__range}", "1h").replace("$__range", "1h")  # the dashboard's time range
    for name in sorted(values, key=len, reverse=True):  # $team before $tea...
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    if "$" in expr:
        raise ValueError(f"unfilled variable in {expr!r}")
    return expr


def prometheus_copy(tmp_path: Path) -> Path:
    """A copy of deploy/prometheus (config, rules, unit tests) under `tmp_path`, free to change."""
    copy = tmp_path / "prometheus"
    shutil.copytree(PROMETHEUS_DIR, copy)
    return copy


def prometheus_copy_with_broken_rule(tmp_path: Path, rules_file: str, old: str, new: str, count: int = -1) -> Path:
    """:func:`prometheus_copy` with `old` (which must be in `rules_file`) replaced by `new`, `count` times (-1: all),
    as a careless edit of the rule would."""
    copy = prometheus_copy(tmp_path)
    path = copy / "rules" / rules_file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))
    return copy


def wait_for(what: str, check: Callable[[], T | None], timeout_seconds: float = WAIT_S) -> T:
    """Poll `check` until it returns something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_seconds:.0f}s waiting for {what}")
        time.sleep(0.5)


def wait_until_none_left(what: str, remaining: Callable[[], list[Any]], timeout_seconds: float = WAIT_S) -> None:
    """Poll `remaining` until it returns an empty list; fail with what is left after `timeout_s`."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        left = remaining()
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"after {timeout_seconds:.0f}s, {what}: {left}")
        time.sleep(0.5)


def live_cluster() -> ClusterSpec:
    """The demo's cluster with its faults and start-ups brought within a live test's time; shared by the one-cluster
    (test_prometheus_live) and the two-cluster (test_global_view) live tests, which expect the same alerts of it."""
    cluster = default_cluster(checkpoints=False)  # no checkpoint dips: MFU stays on target
    # Fleet health within the test's time: the link flaps every 10 s, the GPU fault comes 5 s in.
    soon = {FLAPPING_NODE: {"flapping_link_every_seconds": 10.0}, REMAP_NODE: {"fault_after_seconds": 5.0}}
    nodes = tuple(dataclasses.replace(node, **soon.get(node.name, {})) for node in cluster.nodes)
    # The resilient job reports within the shortened not-reporting grace (its start-up is no unwrapped job's).
    jobs = tuple(
        dataclasses.replace(job, lifecycle=dataclasses.replace(job.lifecycle, init_seconds=1.0))
        if job.lifecycle
        else job
        for job in cluster.jobs
    )
    return dataclasses.replace(cluster, nodes=nodes, jobs=jobs)


def live_settings(workdir: Path) -> dict[str, str]:
    """The settings of a live test's aggregator beyond the test defaults: the demo's price list (written to
    `workdir`), as `mfumon demo` gives its own, so that the cost and energy panels have data."""
    return {"MFUMON_PRICES_FILE": str(write_demo_prices(workdir))}


@contextmanager
def simulating(aggregator_url: str, cluster: ClusterSpec) -> Iterator[None]:
    """`cluster`, simulated as `mfumon demo` does, pushing to the aggregator at `aggregator_url` once a second (for
    300 s at most); stopped, and waited for up to 20 s, on leaving."""
    stop = threading.Event()
    thread = threading.Thread(
        target=run_simulation,
        args=(aggregator_url,),
        kwargs={"duration_seconds": 300.0, "interval_seconds": 1.0, "stop_event": stop, "cluster": cluster},
        daemon=True,
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=20.0)


@contextmanager
def start_prometheus(work: Path, config: dict[str, Any], *extra_args: str) -> Iterator[str]:
    """Run a real `prometheus` with `config` (written to work/prometheus.yml, so relative rule_files resolve in `work`)
    and its data and log in `work`; yield its URL once /-/ready answers, and stop it on leaving."""
    path = work / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    log_path = work / "prometheus.log"
    cmd = [
        require_tool("prometheus"),
        f"--config.file={path}",
        f"--storage.tsdb.path={work / 'data'}",
        "--web.listen-address=127.0.0.1:0",  # the kernel picks the port; the log says which
        "--storage.tsdb.retention.time=1h",
        *extra_args,
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    try:
        url = "http://" + wait_for_listening(proc, log_path, _PROMETHEUS_LISTENING).group(1)

        def _ready() -> bool:
            assert proc.poll() is None, f"prometheus exited:\n{log_path.read_text(errors='replace')[-3000:]}"
            try:
                return httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200
            except httpx.TransportError:
                return False

        wait_for("prometheus to be ready", _ready, timeout_seconds=30.0)
        yield url
    finally:
        stop_process(proc)


def write_shortened_rules(target_dir: Path) -> None:
    """Copy the rule files to `target_dir` with alerts' `for:` and the warm-up shortened, so that a test sees them
    fire; shared by the live tests, whose Prometheus servers evaluate the copy. The demo's Prometheus shortens them
    the same way (mfumon.exporter.demo.prometheus), less."""
    shortened = demo_prometheus.write_shortened_rules(
        RULES_DIR, target_dir, for_=SHORT_FOR, warmup_seconds=SHORT_WARMUP_S, group_intervals=False
    )
    assert sorted(shortened) == sorted(SHORTENED_SERIES), "a shortened rule was renamed: update this test"


def instant_query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    """The result of `expr` on the Prometheus at `prometheus`, asserted successful; shared by the live tests."""
    response = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10.0)
    body = response.json()
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


def alert_subject(labels: Mapping[str, str]) -> str:
    """What an alert is about: its job, else its node (node/gpu for a GPU's), else its software change, else its
    pool."""
    if labels.get("job_id"):
        return labels["job_id"]
    if labels.get("component"):
        return f"{labels['component']} {labels.get('from_version')} -> {labels.get('to_version')}"
    if labels.get("node"):
        return labels["node"] + (f"/{labels['gpu']}" if labels.get("gpu") else "")
    return labels.get("pool", "")


def documented_central_relabelling() -> list[dict[str, Any]]:
    """The `write_relabel_configs` docs/operators/deploy.md gives each cluster's Prometheus when the rules run
    centrally: the one YAML block of the page that has them."""
    text = (REPO / "docs" / "operators" / "deploy.md").read_text()
    blocks = [yaml.safe_load(body) for body in re.findall(r"^```yaml\n(.*?)^```", text, re.S | re.M)]
    found = [
        write["write_relabel_configs"]
        for block in blocks
        if isinstance(block, dict)
        for write in block.get("remote_write") or []
        if "write_relabel_configs" in write
    ]
    assert len(found) == 1, "docs/operators/deploy.md: one remote_write with write_relabel_configs expected"
    return found[0]


def firing_alerts(prometheus: str, alertname: str) -> list[dict[str, Any]]:
    """The firing alerts named `alertname` on the Prometheus at `prometheus`; shared by the live tests."""
    alerts = httpx.get(f"{prometheus}/api/v1/alerts", timeout=10.0).json()["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == alertname and a["state"] == "firing"]
