"""Past MAX_INGEST_IN_FLIGHT, or queued past MAX_INGEST_QUEUE_SECONDS, a real server refuses ingest at once (503 +
Retry-After); reads still pass, and the exporter and the reporter wait as told before they try again."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path

import httpx
import pytest

from mfumon.api.server.overload import IngestGate
from mfumon.exporter.job.reporter import JobReporter
from mfumon.exporter.node.push import RetryPolicy, Sender
from mfumon.exporter.node.spool import MemorySpool
from mfumon.exporter.retry_after import retry_after_seconds, spread
from mfumon.exporter.samples import GpuSample, NodeBatch
from tests.conftest import LiveServer, start_server
from tests.utils.factories import metric_value, node_sample
from tests.utils.waiting import eventually

LIMIT = 2
RETRY_AFTER_S = 2


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    env = {"MFUMON_MAX_INGEST_IN_FLIGHT": str(LIMIT), "MFUMON_OVERLOAD_RETRY_AFTER_SECONDS": str(RETRY_AFTER_S)}
    with start_server(tmp_path, env=env) as live:
        yield live


@contextlib.contextmanager
def _held_in_flight(server: LiveServer, count: int) -> Iterator[list[socket.socket]]:
    """``count`` pushes whose bodies arrive only when the block ends: they stay in flight until then. Each comes from
    an address of its own (127.0.0.2, ...): bodies still arriving from one address (with tokens off) hold at most a
    share of the slots (``tests/api/server/test_door_defects.py``)."""
    body = json.dumps(node_sample(1)).encode()
    socks = []
    for k in range(count):
        sock = socket.create_connection(("127.0.0.1", server.port), source_address=(f"127.0.0.{k + 2}", 0))
        head = f"POST /v1/nodes/held-{k}/samples HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
        socks.append(sock)

    def in_flight() -> bool:  # a push beyond the limit is refused once the held ones are counted
        return _push(server).status_code == 503

    assert eventually(in_flight, timeout_seconds=30), "the held requests never counted as in flight"
    try:
        yield socks
    finally:
        for sock in socks:
            sock.sendall(body[10:])
            assert b" 200 " in sock.recv(4096).split(b"\r\n")[0]
            sock.close()


def _push(server: LiveServer, node: str = "other") -> httpx.Response:
    return httpx.post(f"{server.url}/v1/nodes/{node}/samples", json=node_sample(1), timeout=10)


def _overloaded(server: LiveServer, endpoint: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return metric_value(text, "mfumon_ingest_requests_total", endpoint=endpoint, outcome="overloaded") or 0.0


def test_ingest_past_the_limit_is_refused_at_once_and_reads_still_pass(server: LiveServer) -> None:
    with _held_in_flight(server, LIMIT):
        refused = _push(server)
        assert refused.status_code == 503 and refused.headers["Retry-After"] == str(RETRY_AFTER_S)
        assert "overloaded" in refused.json()["detail"]
        report = httpx.post(f"{server.url}/v1/jobs/j/reports", json={"tokens_per_second": 1.0}, timeout=10)
        assert report.status_code == 503 and report.headers["Retry-After"] == str(RETRY_AFTER_S)
        for path in ("/healthz", "/readyz", "/metrics", "/v1/nodes", "/v1/jobs", "/v1/cluster"):
            assert httpx.get(f"{server.url}{path}", timeout=10).status_code == 200, path
        assert _overloaded(server, "node_samples") >= 2 and _overloaded(server, "job_reports") == 1
    assert _push(server).status_code == 200  # the held ones finished: room again
    assert httpx.get(f"{server.url}/v1/nodes/held-0", timeout=10).status_code == 200


def _burst(server: LiveServer, count: int, content_type: str = "application/json") -> list[bytes]:
    """``count`` pushes sent at once on as many connections, as a cluster's exporters do: their status lines."""
    body = json.dumps(node_sample(1)).encode()
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(count)]
    for k, sock in enumerate(socks):
        head = f"POST /v1/nodes/burst-{k}/samples HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    answers = []
    for sock in socks:
        sock.settimeout(30)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            answer += sock.recv(4096)
        answers.append(answer)
        sock.close()
    return answers


def _length(answer: bytes) -> int:
    head = answer.partition(b"\r\n\r\n")[0].lower()
    return int(head.partition(b"content-length: ")[2].partition(b"\r\n")[0] or 0)


@pytest.mark.parametrize("bound_seconds", [0.005, 10.0])
def test_pushes_that_waited_past_the_queue_bound_are_refused_the_rest_taken(
    tmp_path: Path, bound_seconds: float
) -> None:
    """200 pushes arriving together wait behind each other on the server's one event loop (a few hundred
    microseconds each): past MAX_INGEST_QUEUE_SECONDS, counted from when the server read their bytes, they are
    refused with Retry-After before their bodies are validated; within it, every one is taken. (The in-flight
    limit is set out of the way here; the next test is about it.)"""
    env = {"MFUMON_MAX_INGEST_QUEUE_SECONDS": str(bound_seconds), "MFUMON_MAX_INGEST_IN_FLIGHT": "1000"}
    with start_server(tmp_path, env=env) as live:
        answers = _burst(live, 200)
        statuses = [a.split(b"\r\n")[0].split(b" ")[1] for a in answers]
        refused = [a for a, status in zip(answers, statuses, strict=True) if status == b"503"]
        assert set(statuses) <= {b"200", b"503"}
        if bound_seconds < 1:
            assert refused, "200 pushes at once never waited 5 ms"
            assert all(b"retry-after: 1" in a.lower() and b"queued over 0.005 s" in a for a in refused)
        else:
            assert not refused
        assert _overloaded(live, "node_samples") == len(refused)
        nodes = httpx.get(f"{live.url}/v1/nodes", params={"limit": 1000}, timeout=10).json()["data"]
        assert len(nodes) == 200 - len(refused)  # a refused push changed nothing
        assert _push(live).status_code == 200  # the queue drained: taken again


def test_a_burst_past_the_in_flight_limit_is_refused_at_the_door(tmp_path: Path) -> None:
    """200 pushes at once with room for 20: the ones past the limit are answered as their heads arrive, not after
    the ones taken, whatever the queue bound; what was taken is stored, what was refused changed nothing.

    Their content type has parameters, so they go through the app's stack, where requests are in flight together:
    a plain ``application/json`` push that came whole is taken in the callback that read it
    (``tests/api/server/test_in_place.py``), never in flight beside another."""
    env = {"MFUMON_MAX_INGEST_IN_FLIGHT": "20", "MFUMON_MAX_INGEST_QUEUE_SECONDS": "10"}
    with start_server(tmp_path, env=env) as live:
        answers = _burst(live, 200, content_type="application/json; charset=utf-8")
        statuses = [a.split(b"\r\n")[0] for a in answers]
        refused = [a for a, status in zip(answers, statuses, strict=True) if b" 503 " in status]
        assert set(statuses) <= {b"HTTP/1.1 200 OK", b"HTTP/1.1 503 Service Unavailable"}
        assert refused and all(b"more than 20 ingest requests" in a and b"retry-after: 1" in a for a in refused)
        assert len(refused) <= 200 - 20  # never fewer taken than the limit
        assert _overloaded(live, "node_samples") == len(refused)
        nodes = httpx.get(f"{live.url}/v1/nodes", params={"limit": 1000}, timeout=10).json()["data"]
        assert len(nodes) == 200 - len(refused)
        assert _push(live).status_code == 200  # every one taken has been answered: room again


def _answers(sock: socket.socket, count: int) -> list[bytes]:
    """The next ``count`` responses on a kept-alive connection (heads with content-length)."""
    sock.settimeout(30)
    buffer, answers = b"", []
    while len(answers) < count:
        head, sep, rest = buffer.partition(b"\r\n\r\n")
        if sep and len(rest) >= _length(head + sep):
            answers.append(head + sep + rest[: _length(head + sep)])
            buffer = rest[_length(head + sep) :]
            continue
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        buffer += chunk
    return answers


def test_a_connection_refused_at_the_door_stays_usable(server: LiveServer) -> None:
    """The refused push's body is read and dropped: the same connection then serves a read, a pipelined pair,
    and, once there is room, a push; a client that asked to close gets its 503, then the close."""
    body = json.dumps(node_sample(1)).encode()

    def push(node: str, close: bool = False) -> bytes:
        head = f"POST /v1/nodes/{node}/samples HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        head += "Connection: close\r\n" if close else ""
        return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body

    get = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        with _held_in_flight(server, LIMIT):
            sock.sendall(push("door-1"))
            assert b" 503 " in _answers(sock, 1)[0].split(b"\r\n")[0]
            sock.sendall(get)
            assert b" 200 " in _answers(sock, 1)[0].split(b"\r\n")[0]
            sock.sendall(push("door-2") + get)  # pipelined: refused, then the read
            first, second = _answers(sock, 2)
            assert b" 503 " in first.split(b"\r\n")[0] and b" 200 " in second.split(b"\r\n")[0]
            with socket.create_connection(("127.0.0.1", server.port)) as other:
                other.sendall(push("door-3", close=True))
                assert b" 503 " in _answers(other, 1)[0].split(b"\r\n")[0]
                other.settimeout(30)
                assert other.recv(4096) == b""  # closed, as asked
        sock.sendall(push("door-4"))
        assert b" 200 " in _answers(sock, 1)[0].split(b"\r\n")[0]
    stored = {n["name"] for n in httpx.get(f"{server.url}/v1/nodes", timeout=10).json()["data"]}
    assert "door-4" in stored and not stored & {"door-1", "door-2", "door-3"}


def test_the_gate_count_cannot_exceed_the_live_requests() -> None:
    """A request that ended without its decrement (a task cancelled before it ran) cannot wedge the door shut."""
    gate = IngestGate(limit=2, retry_after_seconds=1, max_queue_seconds=1.0)
    assert gate.admit(live_requests=0) and gate.admit(live_requests=1) and not gate.admit(live_requests=2)
    assert gate.admit(live_requests=0)  # both ended without a word: the count follows what is alive
    for _ in range(3):
        gate.done()
    assert gate.pending == 0


def test_the_exporter_waits_retry_after_then_delivers(server: LiveServer) -> None:
    sender = Sender(server.url, MemorySpool(1024**2), retry=RetryPolicy(initial_seconds=0.05, max_seconds=30.0), seed=1)
    gpu = GpuSample(uuid="GPU-x", index=0, name="NVIDIA H100 80GB HBM3", utilization=0.5)
    sender.start()
    try:
        with _held_in_flight(server, LIMIT):
            refused_before = _overloaded(server, "node_samples")
            sender.submit(NodeBatch(node="exp", timestamp=time.time(), gpus=(gpu,)))
            assert eventually(lambda: _overloaded(server, "node_samples") > refused_before, timeout_seconds=30)
            time.sleep(RETRY_AFTER_S / 2)  # its backoff alone (50 ms) would have retried many times by now
            assert _overloaded(server, "node_samples") == refused_before + 1
        assert eventually(lambda: sender.delivered == 1, timeout_seconds=30)
        assert _overloaded(server, "node_samples") == refused_before + 1  # it came back once, when told
    finally:
        sender.stop()


def test_the_reporter_waits_retry_after_then_delivers(server: LiveServer) -> None:
    reporter = JobReporter(job_id="rep", url=server.url, num_gpus=8, gpu_model="h100-sxm", start=False)
    with _held_in_flight(server, LIMIT):
        assert reporter.flush(timeout_seconds=5) is False  # the registration was refused
        refused = _overloaded(server, "job_update")
        assert refused == 1
        started = time.monotonic()
        assert reporter.flush(timeout_seconds=0.5) is False  # not before Retry-After: nothing was sent
        assert time.monotonic() - started < RETRY_AFTER_S and _overloaded(server, "job_update") == refused
    assert reporter.flush(timeout_seconds=RETRY_AFTER_S + 10) is True  # waits out Retry-After, then sends
    assert httpx.get(f"{server.url}/v1/jobs/rep", timeout=10).json()["num_gpus"] == 8
    reporter.close()


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds("2") == 2.0 and retry_after_seconds(" 120 ") == 120.0
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now=now) == 30.0
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now=now) == 0.0  # already past
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("-1") is None
    rng = random.Random(0)
    waits = [spread(2.0, rng) for _ in range(100)]
    assert all(2.0 <= w <= 3.0 for w in waits) and len(set(waits)) > 1  # never sooner, never in lockstep
