"""Shared fixtures: a real ``mfumon serve`` process on a free loopback port, and database URLs.

``MFUMON_TEST_POSTGRES_URL`` (set by ``.ci/run``) points the storage tests at a real PostgreSQL as well as SQLite.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

POSTGRES_URL_ENV = "MFUMON_TEST_POSTGRES_URL"

#: Modules every test of which starts a process (``mfumon serve``, Prometheus, Slurm, Chromium, a training or
#: exporter subprocess, a fresh virtual environment) or sweeps a large input space; their tests are ``slow``.
SLOW_MODULES = frozenset(
    {
        "tests.api.db.test_durability",
        "tests.api.metrics.test_cardinality",
        "tests.api.openapi.test_conformance",
        "tests.api.openapi.test_rules",
        "tests.api.openapi.test_strict_types",
        "tests.api.openapi.test_validation",
        "tests.api.server.test_admission_live",
        "tests.api.server.test_connection_memory",
        "tests.api.server.test_live_server",
        "tests.api.server.test_overload",
        "tests.api.server.test_server_process",
        "tests.api.server.test_slow_clients",
        "tests.api.services.test_concurrency",
        "tests.api.state.test_replicas",
        "tests.deploy.test_dashboards",
        "tests.deploy.test_global_view",
        "tests.deploy.test_prometheus_live",
        "tests.deploy.test_prometheus_rules",
        "tests.deploy.test_rules_clusters",
        "tests.deploy.test_sharded_scrape",
        "tests.exporter.demo.test_demo",
        "tests.exporter.job.profile.test_live_gloo",
        "tests.exporter.job.test_e2e_training",
        "tests.exporter.job.test_integration_events",
        "tests.exporter.job.test_integrations",
        "tests.exporter.job.test_step_timing",
        "tests.exporter.job.test_wrap",
        "tests.exporter.node.test_agent",
        "tests.exporter.node.test_delivery",
        "tests.exporter.ops.test_report",
        "tests.exporter.ops.test_report_fleet_live",
        "tests.exporter.scheduler.test_slurm_live",
        "tests.test_packaging",
        "tests.test_ports",
        "tests.test_readme_examples",
    }
)
#: Fixtures that start a server process (each module's ``server`` is a ``mfumon serve``).
SLOW_FIXTURES = frozenset({"live_server", "server", "aggregator"})
#: Fixtures that hand a test a PostgreSQL database (besides the ``postgres`` side of ``database_url``).
POSTGRES_FIXTURES = frozenset({"shared_postgres"})
#: Markers of tests that need a service or a device; they are slow too.
SERVICE_MARKERS = ("postgres", "prometheus", "gpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark what the quick subset (``pytest -m 'not slow'``) leaves out: tests on the PostgreSQL side of the
    ``database_url`` fixture (also marked ``postgres``), tests needing a service, starting a server, or in a slow
    module."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and callspec.params.get("database_url") == "postgres"
        if on_postgres or POSTGRES_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)
        module = item.module.__name__ if isinstance(item, pytest.Function) else ""
        if (
            module in SLOW_MODULES
            or SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or any(item.get_closest_marker(name) for name in SERVICE_MARKERS)
        ):
            item.add_marker(pytest.mark.slow)


_LISTENING = re.compile(r"mfumon serve: listening on (http://\S+:(\d+))")


@contextlib.contextmanager
def reserved_port() -> Iterator[int]:
    """A loopback port held for the block: bound with SO_REUSEADDR but not listening.

    Connections to it are refused, and no other process's port-0 bind or outgoing connection can be given it, yet a
    server (``mfumon serve`` binds with SO_REUSEADDR too) can listen on it and stop and start again: the race of
    "pick a free port, close it, start a server on it later" cannot happen.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def wait_for_listening(
    proc: subprocess.Popen[bytes], log_path: Path, pattern: re.Pattern[str] = _LISTENING, timeout_seconds: float = 60.0
) -> re.Match[str]:
    """Wait until a child process's log shows the address it listens on (a server started on port 0 says it)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        match = pattern.search(text)
        if match:
            return match
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before listening:\n{text[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args!r} did not say where it listens:\n{text[-3000:]}")
        time.sleep(0.05)


TEST_DEFAULTS = {
    "MFUMON_MAX_INGEST_QUEUE_SECONDS": "10",
    "MFUMON_METRICS_MAX_AGE_SECONDS": "0",
    "MFUMON_REGRESSIONS_INTERVAL_SECONDS": "2",  # the software comparison within a live test's time
}
"""Settings every test server starts with unless the test says otherwise (see :func:`launch_server`)."""


@dataclass
class LiveServer:
    """A running ``mfumon serve`` subprocess."""

    url: str
    port: int
    database_url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _clean_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MFUMON_")}
    env.update(extra or {})
    return env


@contextlib.contextmanager
def start_server(
    tmp_path: Path,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    *,
    port: int = 0,
    database_url: str | None = None,
    timeout_seconds: float = 60.0,
) -> Iterator[LiveServer]:
    """Start ``mfumon serve`` and wait until ``/healthz`` answers.

    Port 0 (the default) lets the server's kernel pick the port, read back from its ``listening on`` line; a fixed
    port comes from :func:`reserved_port`, so it stays ours across restarts.
    """
    server = launch_server(tmp_path, env, args, port=port, database_url=database_url)
    try:
        wait_healthy(server, timeout_seconds)
        yield server
    finally:
        stop_process(server.process)


def launch_server(
    workdir: Path,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    *,
    port: int = 0,
    database_url: str | None = None,
) -> LiveServer:
    """Start ``mfumon serve`` (the caller stops it) and return once it has bound its port; it may not answer yet."""
    database_url = database_url or f"sqlite:///{workdir / 'mfumon.db'}"
    # A push that waited past MFUMON_MAX_INGEST_QUEUE_SECONDS is refused as overload; on a busy CI machine a
    # descheduled server would refuse test pushes that way, so only the overload tests set the production bound.
    # Tests push and scrape at once: every scrape renders, but where a test sets MFUMON_METRICS_MAX_AGE_SECONDS.
    defaults = {"MFUMON_DATABASE_URL": database_url, **TEST_DEFAULTS}
    full_env = _clean_env({**defaults, **(env or {})})
    log_path = workdir / f"serve-{uuid.uuid4().hex[:8]}.log"
    cmd = [sys.executable, "-m", "mfumon", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    try:
        match = wait_for_listening(proc, log_path)
    except BaseException:
        stop_process(proc)
        raise
    return LiveServer(match.group(1), int(match.group(2)), database_url, proc, log_path)


def wait_healthy(server: LiveServer, timeout_seconds: float = 60.0) -> None:
    """Poll ``/healthz`` until the server answers (migrations run before it does)."""
    proc = server.process
    deadline = time.monotonic() + timeout_seconds
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"mfumon serve exited with {proc.returncode}:\n{server.log()}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"mfumon serve did not become healthy:\n{server.log()}")
        time.sleep(0.1)


def stop_process(proc: subprocess.Popen[bytes], timeout_seconds: float = 10.0) -> None:
    """Terminate a child process, killing it if it does not exit in time."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port of our own for the test (see :func:`reserved_port`): refused until a server listens on it."""
    with reserved_port() as port:
        yield port


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A fresh ``mfumon serve`` on SQLite, torn down after the test."""
    with start_server(tmp_path) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_mfumon_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's own MFUMON_* settings out of tests (the Postgres URL for tests stays); in-process apps
    render every scrape (:data:`TEST_DEFAULTS`)."""
    for key in list(os.environ):
        if key.startswith("MFUMON_") and key != POSTGRES_URL_ENV:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MFUMON_METRICS_MAX_AGE_SECONDS", TEST_DEFAULTS["MFUMON_METRICS_MAX_AGE_SECONDS"])
