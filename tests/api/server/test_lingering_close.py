"""A request refused on its head while its body is still coming: the client reads the refusal (issue 54, item 5).

``mfumon serve`` answers 401/403/413 on the head; closing the connection at once, with the body's bytes still
arriving, made the kernel reset it, and a client still sending got "connection reset" instead of the answer. The
server now closes as nginx's lingering close does: it reads and drops the rest of the body (bounded in bytes and
time), then closes. Against the real server process: the client gets the 401 and its message, and the server's
memory stays flat while it drops 60 MB.
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from mfumon.exporter.transport import FreshConnectionRetry
from tests.api.server._served import Served, push_body, push_raw, read_answer
from tests.conftest import LiveServer, start_server
from tests.utils.waiting import eventually

TOKEN = "linger-test-token-0123456789abcdef"
MIB = 1_048_576
BODY_MIB = 60


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    env = {"MFUMON_INGEST_TOKENS": TOKEN, "MFUMON_BODY_TIMEOUT_SECONDS": "120", "MFUMON_MAX_CONNECTIONS": "64"}
    with start_server(tmp_path, env=env) as live:
        yield live


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def _chunks() -> Iterator[bytes]:
    chunk = b"x" * MIB
    for _ in range(BODY_MIB):
        yield chunk


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert "token" in response.json()["detail"].lower(), response.text
    assert response.headers["connection"] == "close"


def test_a_client_still_sending_a_large_body_reads_the_401(server: LiveServer) -> None:
    url = f"{server.url}/v1/nodes/n1/samples"
    wrong = {"authorization": "Bearer wrong-token", "content-type": "application/json"}
    _refused(httpx.post(url, content=b"{}", headers=wrong, timeout=30))  # warm the refusal path
    before = _rss(server.process.pid)
    _refused(httpx.post(url, content=_chunks(), headers=wrong, timeout=30))  # chunked: no Content-Length
    sized = {**wrong, "content-length": str(BODY_MIB * MIB)}
    _refused(httpx.post(url, content=_chunks(), headers=sized, timeout=30))
    grown = _rss(server.process.pid) - before
    assert grown < 4 * MIB, f"the server's RSS grew by {grown / MIB:.1f} MiB dropping {2 * BODY_MIB} MiB"
    with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        assert client.get("/healthz").status_code == 200


def test_the_exporters_transport_surfaces_the_401_without_a_second_try(server: LiveServer) -> None:
    """The exporter's client (:class:`mfumon.exporter.transport.FreshConnectionRetry`) sends a request again when
    its connection was reset: a reset after a refusal used to send the whole body twice, and still fail."""
    transport = FreshConnectionRetry()
    with httpx.Client(base_url=server.url, transport=transport, timeout=30) as client:
        response = client.put(
            "/v1/scheduler/slurm", content=b"[" + b" " * (BODY_MIB * MIB) + b"]", headers={"authorization": "Bearer x"}
        )
    _refused(response)
    assert transport.retried == 0


def test_the_job_reporters_urllib_reads_the_401_message(server: LiveServer) -> None:
    """urllib (the job reporter's client) stops at the first failed write: a reset meant no answer at all, and the
    reporter logged "Connection reset by peer" instead of the token hint."""
    request = urllib.request.Request(
        f"{server.url}/v1/jobs/j1/reports",
        data=b" " * (BODY_MIB * MIB),
        method="POST",
        headers={"authorization": "Bearer wrong", "content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401
    assert b"MFUMON_INGEST_TOKENS" in refused.value.read()


def test_lingering_reads_on_until_a_silence(server: LiveServer) -> None:
    """After the refusal (and a half-close: the client sees the answer end) the server reads what still comes, and
    closes once the client falls silent, long before the body deadline."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    head = "POST /v1/nodes/n1/samples HTTP/1.1\r\nhost: x\r\nauthorization: Bearer no\r\ncontent-length: 100000\r\n\r\n"
    sock.sendall(head.encode() + b"{")
    data = b""
    while chunk := sock.recv(65536):  # the server half-closes after its answer
        data += chunk
    assert data.startswith(b"HTTP/1.1 401 "), data[:200]
    for _ in range(4):  # still read and dropped: no reset
        time.sleep(0.25)
        sock.sendall(b" " * 1000)
    time.sleep(3.5)  # past the silence bound: closed, so what comes now is answered with a reset
    with pytest.raises(OSError):
        for _ in range(3):
            sock.sendall(b" " * 1000)
            time.sleep(0.2)
    sock.close()


def test_a_lingering_connection_counts_against_the_caps_and_is_evicted_first(serve: Callable[..., Served]) -> None:
    """In this process (not slow): lingering cannot hold connections past the guard's caps. With room for two
    untrusted connections, two lingering ones fill it, and a third connection evicts one of them (before the change:
    refused 503, as nothing waited for a head)."""
    served = serve(UNAUTHENTICATED_CONNECTIONS_RATIO=0.002)  # 1000 connections: 2 untrusted
    guard = served.app.state.connection_guard
    lingering = []
    for _ in range(2):
        sock = served.connect()
        head, _ = push_raw("n1", b"", token="wrong")
        sock.sendall(head.replace(b"content-length: 0", b"content-length: 100000") + b"{")
        answer, closed = read_answer(sock)
        assert answer.startswith(b"HTTP/1.1 401 ") and closed  # half-closed after the answer
        lingering.append(sock)
    assert eventually(lambda: len(guard.lingering) == 2)
    sock = served.connect()
    sock.sendall(b"".join(push_raw("n1", push_body())))
    answer, _ = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert guard.closed()["evicted"] == 1
    assert eventually(lambda: len(guard.lingering) == 1)
    for opened in [*lingering, sock]:
        opened.close()
