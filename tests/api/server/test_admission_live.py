"""The door of ``mfumon serve`` refuses on the head: slow, unauthenticated or oversized clients hold nothing (issue 28).

Against the real server: 64 unauthenticated requests that trickle their bodies used to hold every in-flight ingest
slot for the 30 s body deadline (authorised pushes got 503 meanwhile), and unauthenticated 60 MB bodies were read
and parsed before their 401. Durations are never asserted, only what happens.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer, start_server
from tests.utils.factories import metric_value, node_sample

TOKEN = "door-test-token-0123456789abcdef"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    env = {
        "MFUMON_INGEST_TOKENS": TOKEN,
        "MFUMON_MAX_INGEST_IN_FLIGHT": "8",
        "MFUMON_BODY_TIMEOUT_SECONDS": "120",
        "MFUMON_HEADER_TIMEOUT_SECONDS": "120",
        "MFUMON_MAX_CONNECTIONS": "64",
        "MFUMON_UNAUTHENTICATED_CONNECTIONS_RATIO": "0.25",
    }
    with start_server(tmp_path, env=env) as live:
        yield live


_OPENED: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()


def _connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close: no TIME_WAIT
    _OPENED.append(sock)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _response(sock: socket.socket) -> bytes:
    """One whole response on a kept-alive connection: the head, then Content-Length bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")) if k.lower() == b"content-length"
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def _head(method: str, path: str, length: int, extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
    return f"{head}Content-Length: {length}\r\n\r\n".encode()


def test_slow_unauthenticated_requests_are_answered_401_at_once_and_take_no_slot(server: LiveServer) -> None:
    slow = []
    for _ in range(16):  # twice the in-flight limit
        sock = _connect(server)
        sock.sendall(_head("POST", "/v1/jobs/x/reports", 1000) + b"{")
        slow.append(sock)
    for sock in slow:
        answer = _answer(sock)  # closed by the server, not left waiting for the other 999 bytes
        assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
        assert b"connection: close" in answer.lower()
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
        for i in range(20):
            assert client.post(f"/v1/nodes/n{i}/samples", json=node_sample(2)).status_code == 200
        text = client.get("/metrics").text
    assert metric_value(text, "mfumon_ingest_requests_total", endpoint="job_reports", outcome="unauthorized") == 16
    assert metric_value(text, "mfumon_ingest_requests_total", endpoint="node_samples", outcome="overloaded") is None
    assert metric_value(text, "mfumon_http_connections_closed_total", reason="not_admitted") == 16


def test_an_unauthenticated_large_body_is_never_read(server: LiveServer) -> None:
    sock = _connect(server)
    sock.sendall(_head("PUT", "/v1/scheduler/slurm", 60 * 1_048_576))
    answer = _answer(sock)  # answered on the head: not one byte of the 60 MB was sent
    assert answer.startswith(b"HTTP/1.1 401 ")
    authorised = _connect(server)
    authorised.sendall(_head("POST", "/v1/nodes/n1/samples", 2 * 1_048_576, f"Authorization: Bearer {TOKEN}\r\n"))
    assert _answer(authorised).startswith(b"HTTP/1.1 413 ")  # over the 1 MiB limit, also refused on the head


def test_a_wrong_scope_is_403_on_the_head(tmp_path: Path) -> None:
    env = {"MFUMON_INGEST_TOKENS": f"{TOKEN} name=exporters scopes=nodes"}
    with start_server(tmp_path, env=env) as live:
        sock = _connect(live)
        sock.sendall(_head("POST", "/v1/jobs/x/reports", 1000, f"Authorization: Bearer {TOKEN}\r\n") + b"{")
        answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 403 ") and b"'jobs' scope" in answer


def test_a_storm_of_unauthenticated_connections_never_closes_an_authenticated_one(server: LiveServer) -> None:
    trusted = _connect(server)  # an exporter's kept-alive connection: one push, then idle
    body = json.dumps(node_sample(2)).encode()
    push = _head("POST", "/v1/nodes/keep/samples", len(body), f"Authorization: Bearer {TOKEN}\r\n") + body
    trusted.sendall(push)
    assert _response(trusted).startswith(b"HTTP/1.1 200 ")
    storm = [_connect(server) for _ in range(100)]  # far past the 16 unauthenticated allowed (and the cap of 64)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
        text = client.get("/metrics").text
    assert (metric_value(text, "mfumon_http_connections_closed_total", reason="evicted") or 0) >= 100 - 16
    trusted.sendall(push)  # still open: the storm evicted only its own
    assert _response(trusted).startswith(b"HTTP/1.1 200 ")
    assert len(storm) == 100
