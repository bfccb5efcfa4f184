"""Under ``mfumon serve`` a node push whose whole body came with its head is taken in place: in the protocol's
callback, with no ASGI cycle (:func:`mfumon.api.server.door.at_head`). What it answers,
and every side effect, must be what the app's stack answers and does.

Two servers run in-process on real sockets, the same settings and tokens: one as ``mfumon serve`` wires it, one
whose connections never take a request in place. Each request goes to both in one write; the answers (byte for
byte but the ``date`` value), the self-metrics series, the audit lines and the nodes held must be the same, and the
first server must have taken in place exactly the pushes its fast door takes.
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mfumon.api.core.config import Settings
from mfumon.api.main import create_app
from mfumon.api.server import connection_guard
from mfumon.api.server.fast_door import FastDoor
from tests.api.server._pushes import LIMITS, SELF_SERIES, TOKENS, push_body, push_with_gpus
from tests.utils.factories import node_sample
from tests.utils.in_process import serve_in_process
from tests.utils.waiting import eventually

EXPORTER = "Bearer exporter-secret"


@dataclass
class Served:
    url: str
    port: int
    app: Any
    taken: list[str]  # nodes of the pushes taken in place

    def ask(self, raw: bytes, *, split_at: int | None = None) -> bytes:
        """Send ``raw`` on a new connection (in two writes, 0.2 s apart, from ``split_at``); the whole answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            if split_at is None:
                sock.sendall(raw)
            else:
                sock.sendall(raw[:split_at])
                time.sleep(0.2)
                sock.sendall(raw[split_at:])
            return _read_answers(sock, 1)[0]


def _read_answers(sock: socket.socket, count: int) -> list[bytes]:
    """``count`` whole HTTP answers (each framed by its Content-Length) from ``sock``."""
    data, answers = b"", []
    while len(answers) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            length = int(re.search(rb"content-length: (\d+)", data[:head_end], re.IGNORECASE).group(1))  # type: ignore[union-attr]
            end = head_end + 4 + length
            if len(data) >= end:
                answers.append(data[:end])
                data = data[end:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(answers)} answer(s): {data!r}"
        data += chunk
    return answers


def _request(node: str, body: bytes, headers: dict[str, str], method: str = "POST", version: str = "1.1") -> bytes:
    lines = [f"{method} /v1/nodes/{node}/samples HTTP/{version}", "host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _dateless(answer: bytes) -> bytes:
    return re.sub(rb"\r\ndate: [^\r]*", b"\r\ndate: -", answer)


@dataclass
class _Counting:
    """The app's fast door, noting the node of each push it took in place."""

    door: FastDoor
    taken: list[str]

    def take_in_place(self, method: str, path: str, *args: Any) -> bytes | Exception | None:
        answer = self.door.take_in_place(method, path, *args)
        if isinstance(answer, bytes):
            self.taken.append(path.split("/")[3])
        return answer


@contextmanager
def _serve(database: Path, in_place: bool, **settings: Any) -> Iterator[Served]:
    """A started app under uvicorn with the guard ``mfumon serve`` builds; ``in_place=False``: without its door."""
    app = create_app(Settings(DATABASE_URL=f"sqlite:///{database}", **settings))
    guard = connection_guard(app, Settings(**settings), 1000)
    taken: list[str] = []

    def door() -> _Counting | None:  # the app has its fast door once it has started
        return _Counting(app.state.fast_door, taken) if hasattr(app.state, "fast_door") else None

    guard.in_place = door if in_place else None
    with serve_in_process(app, guard) as port:
        yield Served(f"http://127.0.0.1:{port}", port, app, taken)


def _settled_audit(caplog: pytest.LogCaptureFixture, quiet_seconds: float = 0.5) -> list[logging.LogRecord]:
    """The audit records logged so far, once none has come for ``quiet_seconds`` (a server logs after answering)."""
    records: list[logging.LogRecord] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = [r for r in caplog.records if r.name == "api.audit"]
        if now == records:
            return records
        records = now
        time.sleep(quiet_seconds)
    return records


def _loop_thread(served: Served) -> int:
    """The thread ident of the server's event loop, which logs its audit lines (the renderer notes it as it starts)."""
    return int(served.app.state.ctx.renderer._loop_thread)


@pytest.fixture
def pair(migrated_sqlite: Path, tmp_path: Path) -> Iterator[Callable[..., tuple[Served, Served]]]:
    """Two started servers on databases of their own: one takes pushes in place, one never does."""
    with ExitStack() as stack:

        def make(**settings: Any) -> tuple[Served, Served]:
            served = []
            for name, in_place in (("in-place", True), ("stack", False)):
                shutil.copyfile(migrated_sqlite, tmp_path / f"{name}.db")
                served.append(stack.enter_context(_serve(tmp_path / f"{name}.db", in_place, **settings)))
            return served[0], served[1]

        yield make


@dataclass
class WireCase:
    name: str
    node: str = "n1"
    body: Callable[[], bytes] = push_body
    headers: dict[str, str] | None = None  # None: JSON with the exporter's token
    method: str = "POST"
    version: str = "1.1"
    backlogged: bool = False
    taken: bool = False  # taken in place (an error it raised answered through the app's handler)


_JSON = {"content-type": "application/json"}
_CASES = [
    # Pushes that create nodes come first: MAX_NODES is 3.
    WireCase("well-formed", taken=True),
    WireCase("a second node", "n2", taken=True),
    WireCase(
        "JSON with parameters (not the door's)",
        "n3",
        headers={"content-type": "application/json; charset=utf-8", "authorization": EXPORTER},
    ),
    WireCase("a node past MAX_NODES", "n9", taken=True),
    WireCase("a stale push", body=lambda: push_body(timestamp=time.time() - 3600), taken=True),
    WireCase("no token", headers=dict(_JSON)),
    WireCase("a wrong token", headers={**_JSON, "authorization": "Bearer nope"}),
    WireCase("a token without the nodes scope", headers={**_JSON, "authorization": "Bearer jobs-secret"}),
    WireCase("not JSON by its content type", headers={"content-type": "text/plain", "authorization": EXPORTER}),
    WireCase("invalid JSON", body=lambda: b'{"timestamp": '),
    WireCase("a ratio out of range", body=lambda: push_body(utilization=1.5)),
    WireCase("duplicate GPU uuids", body=lambda: push_with_gpus(node_sample(1)["gpus"] * 2)),
    WireCase("a node name with a space", "bad%20node"),
    WireCase("more GPUs than a node may have", body=lambda: push_body(3), taken=True),
    WireCase("a timestamp from the future", body=lambda: push_body(timestamp=time.time() + 3600), taken=True),
    WireCase("a declared body over the limit", body=lambda: b" " * 5000 + push_body()),
    WireCase("the writer backlogged", backlogged=True, taken=True),
    WireCase("asks to close the connection", headers={**_JSON, "connection": "close", "authorization": EXPORTER}),
    WireCase("HTTP/1.0", version="1.0"),
    WireCase("a PUT of the push path", method="PUT"),
    WireCase("after all that, well-formed again", taken=True),
]


def _self_series(served: Served) -> list[str]:
    text = httpx.get(f"{served.url}/metrics", timeout=30).text
    return sorted(line for line in text.splitlines() if line.startswith(SELF_SERIES))


def _nodes(served: Served) -> list[tuple[Any, ...]]:
    nodes = httpx.get(f"{served.url}/v1/nodes", headers={"authorization": EXPORTER}, timeout=30).json()["data"]
    return [(n["name"], n["samples_received"], n["last_timestamp"], [g["counters"] for g in n["gpus"]]) for n in nodes]


def _backlogged(served: Served, on: bool) -> None:
    writer = served.app.state.ctx.sample_writer
    if on:
        writer.lag_seconds = lambda: 1e9
    else:
        writer.__dict__.pop("lag_seconds", None)


@pytest.mark.parametrize("tokens", [True, False], ids=["tokens", "no-tokens"])
def test_in_place_answers_and_does_as_the_stack(
    pair: Callable[..., tuple[Served, Served]], tmp_path: Path, caplog: pytest.LogCaptureFixture, tokens: bool
) -> None:
    """Issue 33: the same bytes on the wire get the same answer from both servers, and leave the same counters,
    audit lines and nodes; the in-place server took exactly the pushes its fast door takes, and only those."""
    settings: dict[str, Any] = {**LIMITS, "METRICS_MAX_AGE_SECONDS": 0}
    if tokens:
        (tmp_path / "tokens").write_text(TOKENS)
        settings["INGEST_TOKENS_FILE"] = tmp_path / "tokens"
    in_place, stack = pair(**settings)
    caplog.set_level(logging.INFO, logger="api.audit")
    statuses, audited = {}, 0
    for case in _CASES:
        headers = case.headers if case.headers is not None else {**_JSON, "authorization": EXPORTER}
        raw = _request(case.node, case.body(), headers, case.method, case.version)
        answers = []
        caplog.clear()
        for served in (in_place, stack):
            _backlogged(served, case.backlogged)
            answers.append(_dateless(served.ask(raw)))
            # The stack logs its audit line once the answer is sent, and ends the request's in-flight slot after.
            assert eventually(lambda served=served: served.app.state.ingest_gate.pending == 0)
            _backlogged(served, False)
        # A request the gate does not count (a PUT) leaves no slot to wait for, and a loaded machine may log its
        # line late: wait for the log to settle, then tell the servers' lines apart by the thread that logged them.
        records = _settled_audit(caplog)
        audit = [[r.getMessage() for r in records if r.thread == _loop_thread(served)] for served in (in_place, stack)]
        assert answers[0] == answers[1], case.name
        assert audit[0] == audit[1], case.name
        audited += len(audit[0])
        assert _self_series(in_place) == _self_series(stack), case.name
        statuses[case.name] = int(answers[0].split()[1])
    assert audited > 0 or not tokens  # lines were told apart by thread, not lost (a write is audited by its token)
    assert _nodes(in_place) == _nodes(stack)
    assert [n[0] for n in _nodes(in_place)] == ["n1", "n2", "n3"]
    answered_200 = [c for c in _CASES if c.taken and statuses[c.name] == 200]
    if not tokens:  # without tokens, a push with none (or any) is taken
        answered_200 += [c for c in _CASES if c.name.startswith(("no token", "a wrong", "a token"))]
    assert sorted(in_place.taken) == sorted(c.node for c in answered_200), statuses
    assert stack.taken == []
    assert statuses["well-formed"] == statuses["a stale push"] == 200
    assert statuses["a node past MAX_NODES"] == 429 and statuses["the writer backlogged"] == 503
    assert statuses["a timestamp from the future"] == statuses["more GPUs than a node may have"] == 422
    assert statuses["asks to close the connection"] == statuses["HTTP/1.0"] == 200
    if tokens:
        assert statuses["no token"] == 401 and statuses["a token without the nodes scope"] == 403


def test_an_answer_in_place_is_the_stacks_byte_for_byte(pair: Callable[..., tuple[Served, Served]]) -> None:
    """The same push on one server, whole in one write (taken in place) and with its body 0.2 s after its head (the
    fast door's ASGI path): the same bytes, status line and headers in their order, but the date."""
    in_place, _ = pair()
    raw = _request("n1", push_body(), _JSON)
    whole = in_place.ask(raw)
    assert in_place.taken == ["n1"]
    split = in_place.ask(_request("n1", push_body(), _JSON), split_at=len(raw) - 20)
    assert in_place.taken == ["n1"]  # the body was not whole when the head was read
    assert _dateless(whole) == _dateless(split)
    assert whole.startswith(b"HTTP/1.1 200 OK\r\ndate: ") and whole.endswith(b'{"accepted":2,"applied":true}')


def test_a_kept_alive_connection_reads_on_after_each_push_in_place(pair: Callable[..., tuple[Served, Served]]) -> None:
    """Pushes one after another on one connection are each taken in place; two pipelined in one write both get
    their answers in order (through the stack: a push is taken in place only with nothing after it); then a read
    on the same connection."""
    in_place, _ = pair()
    with socket.create_connection(("127.0.0.1", in_place.port), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(_request("n1", push_body(), _JSON))
            assert _read_answers(sock, 1)[0].startswith(b"HTTP/1.1 200 OK")
        assert in_place.taken == ["n1"] * 3
        sock.sendall(_request("n2", push_body(), _JSON) + _request("n3", push_body(), _JSON))
        answers = _read_answers(sock, 2)
        assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 2
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        assert _read_answers(sock, 1)[0].startswith(b"HTTP/1.1 200 OK")
    assert in_place.taken == ["n1"] * 3
    assert [(n[0], n[1]) for n in _nodes(in_place)] == [("n1", 3), ("n2", 1), ("n3", 1)]
