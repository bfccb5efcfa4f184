"""The keep-alive race (issue 30 #4): a server closes an idle connection just as the client reuses it.

The server here closes each connection when the *second* request arrives on it (unanswered, as a server whose idle
timeout fires in the instant the request comes), so every push after the first meets the race, deterministically.
The push must arrive (sent again on a fresh connection) and nothing may be logged at WARNING or above.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from mfumon.exporter.node.push import RetryPolicy, Sender
from mfumon.exporter.node.selfmetrics import ExporterMetrics
from mfumon.exporter.node.spool import MemorySpool
from mfumon.exporter.samples import GpuSample, NodeBatch
from mfumon.exporter.transport import FreshConnectionRetry

_OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class ClosingServer:
    """Answers the first request of each connection (kept alive); closes it when a second request comes on it."""

    def __init__(self, how: str) -> None:
        self.how = how  # "reset" (RST: Connection reset by peer) or "close" (FIN: disconnected without a response)
        self.answered: list[bytes] = []
        self.killed = 0
        self._listener = socket.create_server(("127.0.0.1", 0))  # held for the test: the port is never handed on
        _host, port = self._listener.getsockname()[:2]
        self.url = f"http://127.0.0.1:{port}"
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            for number in (1, 2):
                body = _read_request(conn)
                if body is None:
                    return
                if number == 2:  # the client reused the connection: the server's idle timeout fires now
                    self.killed += 1
                    if self.how == "reset":
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                self.answered.append(body)
                conn.sendall(_OK)

    def close(self) -> None:
        self._listener.close()


def _read_request(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return body


@pytest.fixture(params=["reset", "close"])
def closing_server(request: pytest.FixtureRequest) -> Iterator[ClosingServer]:
    server = ClosingServer(request.param)
    yield server
    server.close()


def _wait_for(what: str, check: Callable[[], bool], timeout_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _batch(timestamp: float) -> NodeBatch:
    gpu = GpuSample(uuid="GPU-1", index=0, name="NVIDIA H100 80GB HBM3", utilization=0.5)
    return NodeBatch(node="n1", timestamp=timestamp, gpus=(gpu,))


def test_a_push_on_a_connection_the_server_closes_is_delivered_without_a_word(
    closing_server: ClosingServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    metrics = ExporterMetrics()
    sender = Sender(closing_server.url, MemorySpool(1024**2), metrics=metrics, retry=RetryPolicy(60.0, 60.0))
    sender.start()
    try:
        for number in range(1, 5):
            sender.submit(_batch(1000.0 + number))
            _wait_for(f"push {number}", lambda n=number: sender.delivered == n)  # type: ignore[misc]
    finally:
        sender.stop()
    assert closing_server.killed == 3  # pushes 2, 3 and 4 each met the race
    assert [b'"timestamp":100' in body for body in closing_server.answered] == [True] * 4
    assert metrics.registry.get_sample_value("mfumon_exporter_push_total", {"outcome": "error"}) == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_transport_retries_once_then_gives_up(closing_server: ClosingServer) -> None:
    """Two stale connections in a row are not the race: the second failure is raised, not retried forever."""

    class AlwaysStale(httpx.BaseTransport):
        calls = 0

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            AlwaysStale.calls += 1
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    transport = FreshConnectionRetry(AlwaysStale())
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.RemoteProtocolError):
        client.post(f"{closing_server.url}/x", json={})
    assert AlwaysStale.calls == 2 and transport.retried == 1


def test_a_refused_connection_is_not_retried() -> None:
    calls = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ConnectError("Connection refused", request=request)

    client = httpx.Client(transport=FreshConnectionRetry(httpx.MockTransport(refuse)))
    with client, pytest.raises(httpx.ConnectError):
        client.get("http://127.0.0.1:9/")
    assert len(calls) == 1
