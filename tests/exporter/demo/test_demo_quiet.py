"""``mfumon demo`` as a person runs it (issue 30 #4): the pages' address first, a Prometheus beside it, and no error
of its own on an idle machine.

The keep-alive race itself is tested deterministically in tests/exporter/node/test_keepalive_race.py; the run here is
the whole demo over a bounded window, as a regression guard for anything else it might print. The 15-minute check
the issue asks for was run by hand on 2026-12-03, on the 2-core development machine with other work beside it
(test runs, schemathesis): ``mfumon demo --port 0 --duration 900 > demo.log 2>&1``, then
``grep -v '^  ' demo.log``, which left only the banner and "stopped after 175 cycles, 1163 job reports and 1801 node
batches delivered". Before the fix, the first "push failed: [Errno 104] Connection reset by peer" came within 2
minutes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from mfumon.exporter.demo.prometheus import PrometheusUnavailable, find_rules_dir, scrape_config, shortened_note
from tests.deploy._support import REPO, SIMULATED_ALERTS, require_tool

pytestmark = pytest.mark.slow

#: the lines the demo prints on its own: its banner (an indented address list, one description) and its last line
_OWN_LINES = re.compile(
    r"^(mfumon demo: open http\S+/ui in a browser|  \S.*|Simulating .*|mfumon demo: stopped after .*)$"
)


def _demo(*args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "mfumon", "demo", "--port", "0", *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _wait_for(what: str, check: Callable[[], bool], timeout_seconds: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_a_demo_run_prints_no_error_of_its_own() -> None:
    """Seven intervals at the default 5 s, every node pushing and every job reporting: only the demo's own lines."""
    proc = _demo("--duration", "35")
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("mfumon demo: open http://127.0.0.1:") and lines[0].endswith("/ui in a browser")
    assert lines[-1].startswith("mfumon demo: stopped after ")
    assert [line for line in lines if not _OWN_LINES.match(line)] == []


def test_prometheus_beside_the_demo_loads_the_rules_and_scrapes_it() -> None:
    require_tool("prometheus")
    proc = _demo("--interval", "1", "--prometheus")
    assert proc.stdout is not None
    try:
        banner = [proc.stdout.readline() for _ in range(3)]
        assert "/ui in a browser" in banner[0] and "aggregator at http" in banner[1], banner
        found = re.search(r"prometheus: (http://127\.0\.0\.1:\d+) ", banner[2])
        assert found, banner
        prometheus = found.group(1)

        def scraped() -> bool:
            targets = httpx.get(f"{prometheus}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
            return [(t["labels"]["job"], t["health"]) for t in targets] == [("mfumon-aggregator", "up")]

        _wait_for("Prometheus to scrape the demo", scraped)
        groups = httpx.get(f"{prometheus}/api/v1/rules", timeout=5).json()["data"]["groups"]
        files = {Path(group["file"]).name for group in groups}
        assert files == {path.name for path in find_rules_dir().glob("*.yml")}
        query = httpx.get(f"{prometheus}/api/v1/query", params={"query": "mfumon_cluster_mfu_ratio"}, timeout=5)
        _wait_for("a demo series in Prometheus", lambda: bool(httpx.get(query.url, timeout=5).json()["data"]["result"]))
        recorded = query.url.copy_with(params={"query": "job_id:mfumon_job_mfu_ratio:max"})  # a recording rule
        _wait_for(
            "the rules to record the demo's jobs", lambda: bool(httpx.get(recorded, timeout=5).json()["data"]["result"])
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{prometheus}/-/ready", timeout=2)  # stopped with the demo


def test_the_generated_configuration_passes_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    config = tmp_path / "prometheus.yml"
    config.write_text(scrape_config("http://127.0.0.1:8000", find_rules_dir()))
    checked = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout + checked.stderr


def test_without_rules_the_option_says_where_to_find_them(tmp_path: Path) -> None:
    with pytest.raises(PrometheusUnavailable, match="--prometheus-rules DIR"):
        find_rules_dir(tmp_path)


#: docs/getting-started/demo-with-prometheus-and-grafana.md promises it; so does the demo's banner.
PROMISED_MINUTES = 10


def test_every_alert_with_a_case_in_the_demo_fires_within_the_promised_time() -> None:
    """The demo as a person runs it (its default 5 s interval), its Prometheus with the demo's shortened timings:
    every alert the simulation has a case for (SIMULATED_ALERTS) fires within the minutes the docs promise."""
    require_tool("prometheus")
    page = (REPO / "docs" / "getting-started" / "demo-with-prometheus-and-grafana.md").read_text()
    assert f"within {PROMISED_MINUTES} minutes" in page and f"within {PROMISED_MINUTES} minutes" in shortened_note()
    started = time.monotonic()
    proc = _demo("--prometheus")
    assert proc.stdout is not None
    try:
        banner = [proc.stdout.readline() for _ in range(4)]
        found = re.search(r"prometheus: (http://127\.0\.0\.1:\d+) ", banner[2])
        assert found and "shortened" in banner[3], banner
        prometheus = found.group(1)

        def missing() -> set[str]:
            alerts = httpx.get(f"{prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
            return set(SIMULATED_ALERTS) - {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}

        left = set(SIMULATED_ALERTS)
        while left and time.monotonic() - started < PROMISED_MINUTES * 60:
            time.sleep(5)
            left = missing()
        assert not left, f"not firing after {PROMISED_MINUTES} minutes: {sorted(left)}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
