"""Idle kept-alive connections live for KEEPALIVE_TIMEOUT_SECONDS, longer than any client's interval (issue 30 #4).

The request-head deadline used to run from the previous response too, so an idle connection was closed after
min(keep-alive, head deadline): a client pushing every 5 s met connections the server was closing in that instant.
Now the head deadline runs from a connection's opening or from the first byte of a later request.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mfumon.api.core.config import Settings
from mfumon.exporter.job.reporter import JobReporter
from mfumon.exporter.node.settings import Settings as ExporterSettings
from tests.conftest import start_server

_GET = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def _answer(sock: socket.socket) -> bytes:
    """One whole response (head and Content-Length body), or what came before the server closed."""
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(v) for k, _, v in (h.partition(b":") for h in head.split(b"\r\n")) if k == b"content-length")
    while len(body) < length:
        body += sock.recv(65536)
    return data


def _wait_for(what: str, check: Callable[[], bool], timeout_seconds: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _closed(sock: socket.socket) -> bytes | None:
    """What the server sent before closing, or None while the connection is open."""
    sock.setblocking(False)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except BlockingIOError:
        return None
    except ConnectionResetError:
        pass
    return data


def test_the_default_idle_timeout_outlasts_every_client_interval() -> None:
    reporter = JobReporter("keepalive-defaults", url="http://127.0.0.1:9", start=False)
    intervals = [ExporterSettings().INTERVAL, reporter.interval_seconds, 30.0, 60.0]  # scheduler, reporter at most
    reporter.close(timeout_seconds=0.1)
    assert max(intervals) < Settings().KEEPALIVE_TIMEOUT_SECONDS
    assert Settings().KEEPALIVE_TIMEOUT_SECONDS > Settings().HEADER_TIMEOUT_SECONDS


@pytest.mark.slow
def test_an_idle_connection_outlives_the_head_deadline_and_a_slow_head_does_not(tmp_path: Path) -> None:
    env = {"MFUMON_HEADER_TIMEOUT_SECONDS": "1", "MFUMON_KEEPALIVE_TIMEOUT_SECONDS": "600"}
    with start_server(tmp_path, env=env) as server:
        address = ("127.0.0.1", server.port)
        with socket.create_connection(address) as idle, socket.create_connection(address) as slow:
            for sock in (idle, slow):
                sock.sendall(_GET)
                assert _answer(sock).startswith(b"HTTP/1.1 200 ")
            slow.sendall(b"GET /healthz HT")  # part of a second head, and no more: the head deadline applies
            _wait_for("the slow head to be closed", lambda: _closed(slow) is not None)
            time.sleep(3)  # idle for three head deadlines between two requests
            idle.setblocking(True)
            idle.sendall(_GET)
            assert _answer(idle).startswith(b"HTTP/1.1 200 ")  # the same connection, still open


@pytest.mark.slow
def test_an_idle_connection_is_closed_after_the_keepalive_timeout(tmp_path: Path) -> None:
    env = {"MFUMON_HEADER_TIMEOUT_SECONDS": "600", "MFUMON_KEEPALIVE_TIMEOUT_SECONDS": "1"}
    with start_server(tmp_path, env=env) as server, socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(_GET)
        assert _answer(sock).startswith(b"HTTP/1.1 200 ")
        _wait_for("the idle connection to be closed", lambda: _closed(sock) is not None)
