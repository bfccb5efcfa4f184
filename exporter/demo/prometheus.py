"""``mfumon demo --prometheus``: a Prometheus beside the demo, with the project's rules, scraping its aggregator.

So an operator sees the recording rules, the alerts and (with Grafana, docs/getting-started/
demo-with-prometheus-and-grafana.md) the boards on a laptop, without Docker. The generated configuration is
``deploy/prometheus/prometheus.yml`` for one local aggregator: the same job name (``mfumon-aggregator``, which
``MfumonAggregatorDown`` relies on), the repository's ``deploy/prometheus/rules/*.yml``, ``cluster="demo"`` as
external label (every rule keeps ``cluster``), a 5 s scrape to match the demo's interval. Prometheus listens on a
free loopback port, keeps its data and log in the demo's data directory, and stops with the demo.

The rules are loaded from a copy with the alerts' ``for:`` and the jobs' warm-up and not-reporting grace shortened
(`DEMO_FOR`, `DEMO_WARMUP_SECONDS`; the demo says so when it starts): with the production values a job alert needs
25 to 40 minutes to fire, and a demo is looked at for ten. The live tests shorten them the same way, further.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml

__all__ = [
    "DEMO_FOR",
    "DEMO_WARMUP_SECONDS",
    "SHORTENED_SERIES",
    "DemoPrometheus",
    "PrometheusUnavailable",
    "find_rules_dir",
    "scrape_config",
    "start_prometheus",
    "write_shortened_rules",
]

SCRAPE_INTERVAL_SECONDS = 5
#: Every alert's ``for:`` in the demo's Prometheus (production: 3 to 30 minutes).
DEMO_FOR = "1m"
#: The jobs' warm-up and not-reporting grace in the demo (production: 600 s and 1800 s).
DEMO_WARMUP_SECONDS = 120
#: The recording rules that hold those two defaults (deploy/prometheus/rules/mfumon-thresholds.yml).
SHORTENED_SERIES = ("cluster:mfumon_job_warmup_seconds:default", "cluster:mfumon_unreported_grace_seconds:default")
#: the rules of a source checkout: this file is exporter/demo/prometheus.py
_CHECKOUT_RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules"


class PrometheusUnavailable(Exception):
    """Prometheus cannot be started beside the demo; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class DemoPrometheus:
    """A running Prometheus: its URL, its process, the files it was given."""

    url: str
    process: subprocess.Popen[bytes]
    config_path: Path
    log_path: Path

    def stop(self, timeout_seconds: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def find_rules_dir(given: str | Path | None = None) -> Path:
    """The rule files to load: ``given``, else the checkout's ``deploy/prometheus/rules``."""
    rules = Path(given) if given else _CHECKOUT_RULES
    if not rules.is_dir() or not any(rules.glob("*.yml")):
        raise PrometheusUnavailable(
            f"no Prometheus rule files in {rules}: run the demo from a source checkout, or give the rules of one "
            "with --prometheus-rules DIR (deploy/prometheus/rules in the repository)"
        )
    return rules


def write_shortened_rules(
    rules_dir: Path, target_dir: Path, *, for_: str, warmup_seconds: float, group_intervals: bool = True
) -> list[str]:
    """Copy the rule files of `rules_dir` to `target_dir` with every alert's ``for:`` set to `for_` and the warm-up and
    grace defaults to `warmup_seconds`; ``group_intervals=False`` drops the groups' own intervals (the global one
    applies). Returns the shortened series, so that a caller can tell when one was renamed."""
    target_dir.mkdir(parents=True, exist_ok=True)
    shortened: list[str] = []
    for path in sorted(rules_dir.glob("*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for group in data["groups"]:
            if not group_intervals:
                group.pop("interval", None)
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = for_
                if rule.get("record") in SHORTENED_SERIES:
                    rule["expr"] = f"vector({warmup_seconds:g})"
                    shortened.append(rule["record"])
        (target_dir / path.name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return shortened


def shortened_note() -> str:
    """What the demo says about its alert timings."""
    minutes = DEMO_WARMUP_SECONDS / 60
    return (
        f"alerts' for: shortened to {DEMO_FOR} and the jobs' warm-up and not-reporting grace to {minutes:g} min for "
        "the demo, so that each alert with a case here fires within 10 minutes (production values: "
        "deploy/prometheus/rules)"
    )


def scrape_config(aggregator_url: str, rules_dir: Path, scrape_interval_seconds: int = SCRAPE_INTERVAL_SECONDS) -> str:
    """The configuration (JSON, which is YAML) for one local aggregator with the project's rules."""
    parts = urlsplit(aggregator_url)
    config = {
        "global": {
            "scrape_interval": f"{scrape_interval_seconds}s",
            "evaluation_interval": f"{scrape_interval_seconds}s",
            "external_labels": {"cluster": "demo"},
        },
        "rule_files": [str(rules_dir.resolve() / "*.yml")],
        "scrape_configs": [
            {
                "job_name": "mfumon-aggregator",
                "metrics_path": "/metrics",
                "scheme": parts.scheme or "http",
                "static_configs": [{"targets": [parts.netloc]}],
            }
        ],
    }
    return json.dumps(config, indent=2) + "\n"


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_prometheus(
    aggregator_url: str,
    data_dir: Path,
    *,
    binary: str = "prometheus",
    rules_dir: Path | None = None,
    timeout_seconds: float = 60.0,
) -> DemoPrometheus:
    """Start Prometheus on a free loopback port and wait until it is ready; ``PrometheusUnavailable`` if it cannot."""
    executable = shutil.which(binary)
    if executable is None:
        raise PrometheusUnavailable(
            f"--prometheus needs a Prometheus binary: {binary!r} is not on the PATH (install it, e.g. apt install "
            "prometheus, or name it with --prometheus-binary PATH)"
        )
    folder = data_dir / "prometheus"
    folder.mkdir(parents=True, exist_ok=True)
    rules = folder / "rules"
    write_shortened_rules(find_rules_dir(rules_dir), rules, for_=DEMO_FOR, warmup_seconds=DEMO_WARMUP_SECONDS)
    config_path = folder / "prometheus.yml"
    config_path.write_text(scrape_config(aggregator_url, rules), encoding="utf-8")
    port = _free_loopback_port()
    command = [
        executable,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1d",
    ]
    log_path = folder / "prometheus.log"
    with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    running = DemoPrometheus(f"http://127.0.0.1:{port}", process, config_path, log_path)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:]
            raise PrometheusUnavailable(f"Prometheus exited at start (log {log_path}):\n{tail}")
        try:
            if httpx.get(f"{running.url}/-/ready", timeout=1.0).status_code == 200:
                return running
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    running.stop()
    raise PrometheusUnavailable(f"Prometheus was not ready within {timeout_seconds:g} s (log {log_path})")
