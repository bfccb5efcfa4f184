"""Idle, slow and silent clients cannot take ``mfumon serve`` down (issue 10 #6).

3,000 half-open connections used to be held for good, about 20,000 filled the file-descriptor limit and stopped
``/healthz``, a Content-Length longer than its body hung forever, and the server wrote 58 MB of repeated log lines.
These tests run the real server with short deadlines; durations are never asserted, only what happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from mfumon.api.core.logs import RepeatLimit
from tests.conftest import LiveServer, start_server
from tests.utils.factories import metric_value

SLOW_CLIENTS = 2000


_OPENED: list[socket.socket] = []


def _connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close: no TIME_WAIT
    _OPENED.append(sock)
    return sock


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()


def _closed_by_server(sock: socket.socket) -> bytes | None:
    """What the server sent before closing, or None while the connection is still open."""
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


def _wait_for(what: str, check: Callable[[], bool], timeout_seconds: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _closed(server: LiveServer) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    reasons = ("header_timeout", "body_timeout", "write_timeout", "evicted", "refused")
    values = {r: metric_value(text, "mfumon_http_connections_closed_total", reason=r) for r in reasons}
    values["open"] = metric_value(text, "mfumon_http_connections")
    return {k: v or 0.0 for k, v in values.items()}


@contextlib.contextmanager
def _serve(tmp_path: Path, **settings: Any) -> Iterator[LiveServer]:
    env = {f"MFUMON_{k}": str(v) for k, v in settings.items()}
    with start_server(tmp_path, env=env) as server:
        yield server


@pytest.fixture
def many_descriptors() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < SLOW_CLIENTS + 500:
        if hard != resource.RLIM_INFINITY and hard < SLOW_CLIENTS + 500:
            pytest.skip(f"needs {SLOW_CLIENTS + 500} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def test_a_body_that_never_arrives_gets_408(tmp_path: Path) -> None:
    with _serve(tmp_path, BODY_TIMEOUT_SECONDS=1) as server:
        sock = _connect(server)
        head = b"POST /v1/jobs/slow/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        sock.sendall(head + b'Content-Length: 100\r\n\r\n{"tokens_per_second": ')  # 78 bytes short, for good
        sock.settimeout(60)
        answer = b""
        while chunk := sock.recv(65536):  # the server answers, then closes the connection
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"connection: close" in answer.lower() and b"did not arrive in time" in answer
        assert httpx.get(f"{server.url}/v1/jobs", timeout=10).json()["count"] == 0
        assert _closed(server)["body_timeout"] == 1


def test_silent_and_slow_header_connections_are_closed(tmp_path: Path) -> None:
    with _serve(tmp_path, HEADER_TIMEOUT_SECONDS=1) as server:
        silent = [_connect(server) for _ in range(20)]
        trickling = [_connect(server) for _ in range(20)]
        open_trickles = list(trickling)
        deadline = time.monotonic() + 120
        while open_trickles:  # slowloris: one byte of a request head at a time, forever
            assert time.monotonic() < deadline, "the server kept slow clients"
            for sock in list(open_trickles):
                try:
                    sock.send(b"G")
                except OSError:
                    open_trickles.remove(sock)
            time.sleep(0.2)
        _wait_for("silent connections to be closed", lambda: all(_closed_by_server(s) is not None for s in silent))
        assert all(_closed_by_server(s) == b"" for s in silent)  # nothing was asked, so nothing is answered
        closed = _closed(server)
        assert closed["header_timeout"] >= 40 and closed["open"] <= 2  # the scrape's own connection
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_healthz_answers_while_2000_slow_clients_are_connected_and_they_go_away(
    tmp_path: Path, many_descriptors: None
) -> None:
    # Every connection may be unauthenticated here: this is about the head deadline, not the share of connections
    # kept for authenticated clients (tests/api/server/test_admission_live.py).
    with _serve(tmp_path, HEADER_TIMEOUT_SECONDS=20, UNAUTHENTICATED_CONNECTIONS_RATIO=1) as server:
        clients = []
        for i in range(SLOW_CLIENTS):
            sock = _connect(server)
            if i % 2:  # half silent, half stuck in the middle of a request head
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            clients.append(sock)
        latencies = []
        for _ in range(5):
            started = time.perf_counter()
            assert httpx.get(f"{server.url}/healthz", timeout=30).json() == {"status": "ok"}
            latencies.append(time.perf_counter() - started)
        still_open = sum(_closed_by_server(s) is None for s in clients)
        print(f"/healthz with {still_open} slow clients connected: {max(latencies) * 1000:.0f} ms at worst")
        # The server recovers alone: every slow client is cut off at the head deadline.
        _wait_for("slow clients to be closed", lambda: all(_closed_by_server(s) is not None for s in clients))
        closed = _closed(server)
        assert closed["header_timeout"] >= SLOW_CLIENTS and closed["open"] <= 2
        for sock in clients:
            sock.close()
        assert httpx.get(f"{server.url}/v1/jobs", timeout=10).status_code == 200


def test_past_the_cap_the_longest_waiting_connection_makes_room(tmp_path: Path) -> None:
    with _serve(tmp_path, MAX_CONNECTIONS=32, HEADER_TIMEOUT_SECONDS=600) as server:
        idle = [_connect(server) for _ in range(60)]
        assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
        _wait_for("the oldest to be evicted", lambda: sum(_closed_by_server(s) is not None for s in idle) >= 29)
        closed = [i for i, s in enumerate(idle) if _closed_by_server(s) is not None]
        assert closed == list(range(len(closed)))  # oldest first
        counts = _closed(server)
        assert counts["evicted"] >= 29 and counts["refused"] == 0


def test_repeated_log_lines_are_limited(tmp_path: Path) -> None:
    with _serve(tmp_path, LOG_REPEATS_PER_MINUTE=5) as server:
        for _ in range(200):  # each one makes uvicorn log "Invalid HTTP request received."
            sock = _connect(server)
            sock.sendall(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
            sock.settimeout(30)
            with contextlib.suppress(OSError):
                while sock.recv(65536):
                    pass
            sock.close()
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        log = server.log()
    assert log.count("Invalid HTTP request received.") == 5


def test_repeat_limit_counts_what_it_drops() -> None:
    now = [0.0]
    limit = RepeatLimit(burst=3, period_seconds=60.0, clock=lambda: now[0])

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, args, None)

    passed = [limit.filter(record("socket.accept() out of system resource")) for _ in range(1000)]
    assert passed.count(True) == 3
    assert limit.filter(record("job %s failed", "a")) and limit.filter(record("job %s failed", "b"))  # other lines
    now[0] = 61.0
    later = record("socket.accept() out of system resource")
    assert limit.filter(later)
    assert later.getMessage() == "socket.accept() out of system resource [and 997 more like this in the last 60 s]"


def test_a_client_that_stops_reading_is_dropped() -> None:
    """The write deadline, on the protocol itself: a response the client does not read for long is abandoned."""
    from mfumon.api.server.guard import ConnectionGuard
    from mfumon.api.server.protocol import GuardedH11Protocol

    loop = asyncio.new_event_loop()
    try:
        guard = ConnectionGuard(header_timeout_seconds=60, write_timeout_seconds=0.05, max_connections=16)
        config = mock.Mock(connection_guard=guard, loaded=True, h11_max_incomplete_event_size=None, root_path="")
        state = mock.Mock(connections=set(), tasks=set(), default_headers=[])
        protocol = GuardedH11Protocol(config=config, server_state=state, app_state={}, _loop=loop)
        transport = mock.Mock(is_closing=mock.Mock(return_value=False), get_extra_info=mock.Mock(return_value=None))
        protocol.connection_made(transport)
        protocol.pause_writing()  # the client's window is full
        loop.run_until_complete(asyncio.sleep(0.2))
        transport.abort.assert_called_once()
        assert guard.closed()["write_timeout"] == 1
        protocol.resume_writing()
        protocol.connection_lost(None)
        assert not guard.waiting
    finally:
        loop.close()
