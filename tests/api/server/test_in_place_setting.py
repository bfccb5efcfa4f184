"""``MFUMON_IN_PLACE`` (issue 54): 0 serves every request through the ASGI stack, with the same answers; ``mfumon
serve`` falls back to it by itself, with one warning, when uvicorn, h11 or asyncio lack a member the in-place path
relies on (:func:`mfumon.api.server.protocol.in_place_gaps`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import httpx
import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol

from mfumon.api.core.config import Settings
from mfumon.api.server import connection_guard, in_place
from mfumon.api.server.protocol import RELIED_ON, in_place_gaps
from tests.api.server._served import Served, push_body, read_answer
from tests.utils.in_process import serve_in_process

EXPORTER = "authorization: Bearer exporter-secret\r\n"
JSON = "content-type: application/json\r\n"


def _raw(method: str, path: str, body: bytes = b"", extra: str = "", length: int | None = None) -> bytes:
    length = len(body) if length is None else length
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\n{extra}"
    if method != "HEAD" or length:
        head += f"content-length: {length}\r\n"
    return (head + "\r\n").encode() + body


_PUSH = "/v1/nodes/n1/samples"
CASES: list[tuple[str, str, bytes]] = [  # name, method, request
    ("HEAD of a read route", "HEAD", _raw("HEAD", "/v1/nodes")),
    ("HEAD declaring a body over the limit", "HEAD", _raw("HEAD", "/v1/nodes", length=99_999_999)),
    ("a good push", "POST", _raw("POST", _PUSH, push_body(), JSON + EXPORTER)),
    ("a bad push", "POST", _raw("POST", _PUSH, b'{"timestamp": ', JSON + EXPORTER)),
    ("no token", "POST", _raw("POST", _PUSH, push_body(), JSON)),
    ("the wrong scope", "POST", _raw("POST", _PUSH, push_body(), JSON + "authorization: Bearer team-a-jobs\r\n")),
    ("a declared body over the limit", "POST", _raw("POST", _PUSH, b"", JSON + EXPORTER, length=5000)),
    ("both framings", "POST", _raw("POST", _PUSH, b"0\r\n\r\n", JSON + EXPORTER + "transfer-encoding: chunked\r\n")),
    ("the good push again", "POST", _raw("POST", _PUSH, push_body(), JSON + EXPORTER)),
]


def _dateless(answer: bytes) -> bytes:
    return re.sub(rb"\r\ndate: [^\r]*", b"\r\ndate: -", answer)


def test_in_place_and_the_asgi_stack_answer_byte_for_byte(serve: Callable[..., Served]) -> None:
    """The same requests to a server with the in-place path and one with ``IN_PLACE=0``: the same bytes, but the
    date, and the same connections closed after them."""
    limits = {"MAX_BODY_BYTES": 4096}
    door, stack = serve(**limits), serve(IN_PLACE=False, **limits)
    assert door.app.state.ingest_gate.door and not stack.app.state.ingest_gate.door  # who counts ingest
    statuses = {}
    for name, method, raw in CASES:
        answers = []
        for served in (door, stack):
            with served.connect() as sock:
                sock.sendall(raw)
                answer, closed = read_answer(sock, method)
            answers.append((_dateless(answer), closed))
        assert answers[0] == answers[1], name
        statuses[name] = int(answers[0][0].split(b" ", 2)[1])
    assert statuses == {
        "HEAD of a read route": 405,  # FastAPI routes a GET only
        "HEAD declaring a body over the limit": 413,
        "a good push": 200,
        "a bad push": 422,
        "no token": 401,
        "the wrong scope": 403,
        "a declared body over the limit": 413,
        "both framings": 400,
        "the good push again": 200,
    }


def test_every_member_relied_on_is_here() -> None:
    """This environment's uvicorn, h11 and asyncio have all the in-place path relies on (a new release that drops
    one fails here, and ``mfumon serve`` then serves through the ASGI stack)."""
    assert len(RELIED_ON) > 20
    assert in_place_gaps() == []
    assert in_place(Settings()) and not in_place(Settings(IN_PLACE=False))


def test_serve_falls_back_to_the_asgi_stack_with_one_warning(
    serve: Callable[..., Served], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A member the in-place path uses gone from uvicorn: one warning naming it, a guard with no door; served with
    that guard, a push is answered by the app's stack."""
    served = serve(IN_PLACE=False)  # an app to build a guard for; its own server is not used
    monkeypatch.delattr(H11Protocol, "_unset_keepalive_if_required")
    caplog.set_level(logging.INFO)
    caplog.clear()
    guard = connection_guard(served.app, Settings(), 100)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "H11Protocol._unset_keepalive_if_required" in warnings[0], warnings
    assert guard.gate is None and guard.admission is None and guard.in_place is None
    monkeypatch.undo()  # uvicorn itself calls it: serve with the guard built without it
    with serve_in_process(served.app, guard) as port:
        answer = httpx.post(
            f"http://127.0.0.1:{port}{_PUSH}",
            content=push_body(),
            headers={"authorization": "Bearer exporter-secret", "content-type": "application/json"},
            timeout=10,
        )
    assert answer.status_code == 200, answer.text
