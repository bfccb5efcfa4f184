"""Shared fixtures: a real ``mfumon serve`` process on a free loopback port, and database URLs.

``MFUMON_TEST_POSTGRES_URL`` (set by ``.ci/run``) points the storage tests at a real PostgreSQL as well as SQLite.
"""

from __future__ import annotations

import contextlib
import os
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


def free_port() -> int:
    """Return a TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    port: int | None = None,
    database_url: str | None = None,
    timeout_s: float = 30.0,
) -> Iterator[LiveServer]:
    """Start ``mfumon serve`` on a free loopback port and wait until ``/healthz`` answers."""
    port = port or free_port()
    database_url = database_url or f"sqlite:///{tmp_path / 'mfumon.db'}"
    full_env = _clean_env({"MFUMON_DATABASE_URL": database_url, **(env or {})})
    log_path = tmp_path / f"serve-{port}-{uuid.uuid4().hex[:6]}.log"
    cmd = [sys.executable, "-m", "exporter", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    server = LiveServer(f"http://127.0.0.1:{port}", port, database_url, proc, log_path)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mfumon serve exited with {proc.returncode}:\n{server.log()}")
            try:
                if httpx.get(f"{server.url}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mfumon serve did not become healthy:\n{server.log()}")
            time.sleep(0.1)
        yield server
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """Terminate a child process, killing it if it does not exit in time."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A fresh ``mfumon serve`` on SQLite, torn down after the test."""
    with start_server(tmp_path) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_mfumon_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's own MFUMON_* settings out of tests (the Postgres URL for tests stays)."""
    for key in list(os.environ):
        if key.startswith("MFUMON_") and key != POSTGRES_URL_ENV:
            monkeypatch.delenv(key, raising=False)
