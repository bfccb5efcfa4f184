"""Issue 54: the door of ``mfumon serve`` (:mod:`mfumon.api.server.door`), seen from a socket.

- the wait for a body is no queueing time: a body that trickles in within the body deadline is never refused as
  overload on an idle server;
- bodies still arriving hold in-flight slots only up to a share per token (and per team): one token's stalled
  bodies never refuse another token's pushes;
- a refused HEAD gets a head and no body, with no traceback;
- a request with both ``Content-Length`` and ``Transfer-Encoding`` is answered 400 and its connection closed, and
  the door's refusals carry the reason phrase and the default headers uvicorn's own answers carry.

Each server runs in this process (:func:`tests.utils.in_process.serve_in_process`) with the guard ``mfumon serve``
builds, on a copy of the migrated database.
"""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.api.server._served import Served, push_body, push_raw, read_answer
from tests.utils.waiting import eventually


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("gap_seconds", [0.0, 0.12, 0.4])
def test_a_body_that_trickles_in_within_the_body_deadline_is_no_overload(
    serve: Callable[..., Served], gap_seconds: float
) -> None:
    """A push head with its body ``gap_seconds`` later, on an idle server with the production queue bound (50 ms):
    200. The wait for the body used to count as queueing time: 503 "overloaded" past 50 ms."""
    served = serve(MAX_INGEST_QUEUE_SECONDS=0.05, BODY_TIMEOUT_SECONDS=5)
    head, body = push_raw("slow", push_body())
    with served.connect() as sock:
        sock.sendall(head)
        time.sleep(gap_seconds)
        sock.sendall(body[:10])
        time.sleep(gap_seconds)
        sock.sendall(body[10:])
        answer, closed = read_answer(sock)
    assert _status(answer) == 200, answer
    assert not closed


@contextmanager
def _stalled(served: Served, heads: list[bytes]) -> Iterator[list[socket.socket]]:
    """A connection for each head, sent with 10 bytes of a 100-byte body, then nothing more."""
    socks = []
    try:
        for head in heads:
            sock = served.connect()
            sock.sendall(head + b"{" * 10)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


def _overloaded(served: Served) -> int:
    ingest = served.app.state.ctx.self_metrics.ingest
    return sum(count for (_, outcome), count in ingest.items() if outcome == "overloaded")


@pytest.mark.parametrize(
    "stalled_head",
    [
        "POST /v1/nodes/stall-{k}/samples HTTP/1.1\r\nauthorization: Bearer exporter-secret\r\n",
        "POST /v1/jobs/team-a-job/reports HTTP/1.1\r\nauthorization: Bearer team-a-jobs\r\n",
    ],
    ids=["a node token", "a team's jobs token"],
)
def test_one_tokens_stalled_bodies_never_refuse_another_tokenspush_raw(
    serve: Callable[..., Served], stalled_head: str
) -> None:
    """64 bodies (the in-flight limit) stalled by one token after 10 bytes: another token's push is taken at once.
    They used to hold every in-flight slot until the body deadline, and every other push got 503."""
    served = serve(MAX_INGEST_IN_FLIGHT=64, BODY_TIMEOUT_SECONDS=20, MAX_INGEST_QUEUE_SECONDS=10)
    heads = [
        (stalled_head.format(k=k) + "host: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n").encode()
        for k in range(64)
    ]
    gate = served.app.state.ingest_gate
    with _stalled(served, heads):
        # Every stalled head was read: counted in flight or refused.
        assert eventually(lambda: gate.pending + _overloaded(served) >= 64, timeout_seconds=10)
        started = time.monotonic()
        answer = httpx.post(
            f"{served.url}/v1/nodes/other/samples",
            content=push_body(),
            headers={"authorization": "Bearer other-secret", "content-type": "application/json"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        assert time.monotonic() - started < 5  # taken at once, not after the stalled bodies' deadline
        assert gate.pending < 64


def test_a_refused_head_gets_a_head_and_no_body(serve: Callable[..., Served], caplog: pytest.LogCaptureFixture) -> None:
    """HEAD refused at the door (413 on its declared size; 401 when reads need a token): the refusal's head, no
    body, the connection closed cleanly and nothing logged. h11 used to raise on the body sent after a HEAD, inside
    ``data_received``: the connection dropped and a traceback logged."""
    caplog.set_level(logging.WARNING)
    plain = serve()
    reads_need_token = serve(READ_REQUIRES_TOKEN=True)
    for served, extra, status in (
        (plain, "content-length: 99999999\r\n", 413),
        (reads_need_token, "", 401),
    ):
        with served.connect() as sock:
            sock.sendall(f"HEAD /v1/nodes HTTP/1.1\r\nhost: x\r\n{extra}\r\n".encode())
            answer, closed = read_answer(sock, "HEAD")
        assert _status(answer) == status, answer
        assert answer.endswith(b"\r\n\r\n") and closed
        assert re.search(rb"\r\ncontent-length: [1-9]", answer)  # what a GET would have had
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("path", ["/v1/nodes/n1/samples", "/healthz"])
def test_content_length_with_transfer_encoding_is_answered_400_and_closed(
    serve: Callable[..., Served], path: str
) -> None:
    """RFC 9112 section 6.1: a message with both may be an attempt at request smuggling; it must not be served on a
    connection kept open. It used to be served (the chunked body taken) and the connection kept."""
    served = serve()
    body = push_body()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer exporter-secret\r\ncontent-length: {len(chunked)}\r\n"
        "transfer-encoding: chunked\r\n\r\n"
    )
    with served.connect() as sock:
        sock.sendall(head.encode() + chunked + b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        answer, closed = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert closed
    assert httpx.get(f"{served.url}/v1/nodes/n1", timeout=10).status_code == 404  # nothing was taken


def test_door_refusals_carry_the_reason_phrase_and_default_headers(serve: Callable[..., Served]) -> None:
    """Refused at the door (401: no token; 503: past the in-flight limit): the status line's reason phrase, then
    ``date`` and ``server``, as every answer uvicorn writes. They used to have an empty reason and neither header."""
    served = serve(MAX_INGEST_IN_FLIGHT=1, BODY_TIMEOUT_SECONDS=20)
    answers = []
    with served.connect() as sock:
        sock.sendall(b"POST /v1/nodes/n1/samples HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        answers.append(read_answer(sock)[0])
    head, body = push_raw("held", b"{" * 100)
    with _stalled(served, [head]):
        assert eventually(lambda: served.app.state.ingest_gate.pending == 1, timeout_seconds=10)
        with served.connect() as sock:
            head, body = push_raw("n1", push_body(), token="other-secret")
            sock.sendall(head + body)
            answers.append(read_answer(sock)[0])
    for answer, status_line in zip(
        answers, (b"HTTP/1.1 401 Unauthorized", b"HTTP/1.1 503 Service Unavailable"), strict=True
    ):
        lines = answer.split(b"\r\n")
        assert lines[0] == status_line, answer
        assert lines[1].startswith(b"date: ") and lines[2] == b"server: uvicorn", answer
