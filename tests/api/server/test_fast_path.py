"""The node push's fast door (:mod:`mfumon.api.server.fast_door`) answers only what needs no error, and what it answers,
and every side effect, is what the whole stack would have answered and done.

Each request goes, as a raw ASGI call, to two apps with the same settings: one with the door, one built without it
(FastAPI's own stack: the declared route behind every middleware). Status, body and every header must be the same,
and so must the self-metrics series (ingest counts, token writes, refusals, GPU samples), the audit log lines and
the nodes held.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mfumon.api.core.config import Settings
from mfumon.api.main import create_app
from mfumon.api.server import fast_door
from mfumon.api.server.fast_door import STANDS_IN_FOR, FastDoor
from mfumon.api.server.overload import ARRIVED
from tests.api.server._pushes import (
    BODY_TIMEOUT_S,
    GOOD,
    LIMITS,
    SELF_SERIES,
    TOKENS,
    push_body,
)
from tests.utils.factories import node_sample


@dataclass
class Case:
    name: str
    node: str = "n1"
    body: bytes | Callable[[], bytes] = field(default_factory=lambda: push_body)
    headers: dict[str, str] = field(default_factory=lambda: dict(GOOD))
    method: str = "POST"
    length: int | None = -1  # -1: the body's; None: no Content-Length
    chunks: int = 1  # http.request messages the body comes in
    queued_s: float | None = None  # how long ago the server read its bytes (ARRIVED)
    backlogged: bool = False  # the sample writer is past the durability bound
    silent: bool = False  # the body never comes
    taken: bool = False  # the door answers it (an error it raised through the app's handler)


_CASES = [
    # Pushes that create nodes come first: MAX_NODES is 3.
    Case("well-formed", taken=True),
    Case("no content type (read as JSON)", "n2", headers={"authorization": GOOD["authorization"]}),
    Case("JSON with parameters", "n3", headers={**GOOD, "content-type": "application/json; charset=utf-8"}),
    Case("a node past MAX_NODES", "n9", taken=True),
    Case("a stale push", body=lambda: push_body(timestamp=time.time() - 3600), taken=True),
    Case("no token", headers={"content-type": "application/json"}),
    Case("a wrong token", headers={**GOOD, "authorization": "Bearer nope"}),
    Case("a token without the nodes scope", headers={**GOOD, "authorization": "Bearer jobs-secret"}),
    Case("not JSON by its content type", headers={**GOOD, "content-type": "text/plain"}),
    Case("two content types", headers={**GOOD, "Content-Type": "application/json"}),
    Case("invalid JSON", body=b'{"timestamp": '),
    Case("an empty body", body=b""),
    Case("a JSON array", body=b"[]"),
    Case("a ratio out of range", body=lambda: push_body(utilization=1.5)),
    Case("a number as a string", body=lambda: push_body(power_watts="300")),
    Case("an unknown field", body=lambda: json.dumps({**node_sample(2), "extra": 1}).encode()),
    Case(
        "duplicate GPU uuids", body=lambda: json.dumps({**node_sample(2), "gpus": node_sample(1)["gpus"] * 2}).encode()
    ),
    Case("a node name with a space", "bad node"),
    Case("a node name ending in a newline", "n1\n"),
    Case("a node name too long", "n" * 129),
    Case("more GPUs than a node may have", body=lambda: push_body(3), taken=True),
    Case("a timestamp from the future", body=lambda: push_body(timestamp=time.time() + 3600), taken=True),
    Case("a declared body over the limit", body=lambda: b" " * 5000 + push_body()),
    Case("chunked (no Content-Length)", length=None, chunks=2),
    Case("a body in two messages", chunks=2),
    Case("a Content-Length longer than the body", length=10_000),
    Case("a Content-Length shorter than the body", length=10),
    Case("a body that never comes", silent=True),
    Case("queued past the bound", queued_s=3600.0),
    Case("queued within the bound", queued_s=0.0, taken=True),
    Case("the writer backlogged", backlogged=True, taken=True),
    Case("a GET of the push path", method="GET"),
    Case("a PUT of the push path", method="PUT"),
    Case("after all that, well-formed again", taken=True),
]


def _asgi(client: TestClient, case: Case, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request as the server hands it to the app: status, raw headers and body of the answer."""
    size = -(-len(body) // case.chunks) or 1
    parts = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    messages: list[Message] = [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1} for i, part in enumerate(parts)
    ]
    headers = [(k.lower().encode(), v.encode()) for k, v in case.headers.items()]
    if case.length is not None:
        headers.append((b"content-length", str(len(body) if case.length == -1 else case.length).encode()))
    path = f"/v1/nodes/{case.node}/samples"
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": case.method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    if case.queued_s is not None:
        scope[ARRIVED] = time.monotonic() - case.queued_s
    answer: dict[str, Any] = {"body": b""}

    async def receive() -> Message:
        if case.silent:
            await asyncio.sleep(3600)
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer["status"], answer["headers"] = message["status"], list(message.get("headers", []))
        else:
            answer["body"] += message.get("body", b"")

    client.portal.call(client.app, scope, receive, send)  # type: ignore[union-attr]
    return answer["status"], answer["headers"], answer["body"]


def _without_door(app: FastAPI) -> FastAPI:
    app.build_middleware_stack = types.MethodType(FastAPI.build_middleware_stack, app)  # type: ignore[method-assign]
    return app


@pytest.fixture
def pair(migrated_sqlite: Path, tmp_path: Path) -> Iterator[Callable[..., tuple[TestClient, TestClient]]]:
    """Started apps, with the door and without, on databases of their own, with the given settings."""
    with ExitStack() as stack:

        def make(**settings: Any) -> tuple[TestClient, TestClient]:
            clients = []
            for name in ("door", "declared"):
                shutil.copyfile(migrated_sqlite, tmp_path / f"{name}.db")
                app = create_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / name}.db", **settings))
                clients.append(stack.enter_context(TestClient(app if name == "door" else _without_door(app))))
            return clients[0], clients[1]

        yield make


def _self_series(client: TestClient) -> list[str]:
    return sorted(line for line in client.get("/metrics").text.splitlines() if line.startswith(SELF_SERIES))


def _nodes(client: TestClient) -> list[tuple[Any, ...]]:
    nodes = client.get("/v1/nodes", headers={"authorization": GOOD["authorization"]}).json()["data"]
    return [(n["name"], n["samples_received"], n["last_timestamp"], [g["counters"] for g in n["gpus"]]) for n in nodes]


def _taken_by_door(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The nodes of the pushes the door took: ``ingest_push``, called from the door's module, did not decline them
    (the declared route calls it from its own)."""
    taken: list[str] = []
    ingest = fast_door.ingest_push

    def counted(ctx: Any, state: Any, authorization: Any, node: str, *args: Any, **kwargs: Any) -> bytes | None:
        try:
            answer = ingest(ctx, state, authorization, node, *args, **kwargs)
        except Exception:
            taken.append(node)
            raise
        if answer is not None:
            taken.append(node)
        return answer

    monkeypatch.setattr(fast_door, "ingest_push", counted)
    return taken


def _backlogged(client: TestClient, on: bool) -> None:
    writer = client.app.state.ctx.sample_writer  # type: ignore[attr-defined]
    if on:
        writer.lag_seconds = lambda: 1e9
    else:
        writer.__dict__.pop("lag_seconds", None)


@pytest.mark.parametrize("tokens", [True, False], ids=["tokens", "no-tokens"])
def test_the_door_answers_and_does_as_the_whole_stack(
    pair: Callable[..., tuple[TestClient, TestClient]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tokens: bool,
) -> None:
    """Issue 33: the same requests to the app with and without the door get the same status, body and headers, and
    leave the same counters, audit lines and nodes behind; the door took exactly the pushes it should."""
    settings: dict[str, Any] = dict(LIMITS)
    if tokens:
        (tmp_path / "tokens").write_text(TOKENS)
        settings["INGEST_TOKENS_FILE"] = tmp_path / "tokens"
    door, declared = pair(**settings)
    taken = _taken_by_door(monkeypatch)
    caplog.set_level(logging.INFO, logger="api.audit")
    statuses = {}
    for case in _CASES:
        body = case.body() if callable(case.body) else case.body
        audit: list[list[str]] = []
        for client in (door, declared):
            _backlogged(client, case.backlogged)
            caplog.clear()
            started = time.monotonic()
            answer = _asgi(client, case, body)
            assert time.monotonic() - started < 1.5 * BODY_TIMEOUT_S or not case.silent  # one deadline, not two
            audit.append([r.getMessage() for r in caplog.records if r.name == "api.audit"])
            _backlogged(client, False)
            if client is door:
                got = answer
        assert got == answer, case.name
        assert audit[0] == audit[1], case.name
        assert _self_series(door) == _self_series(declared), case.name
        statuses[case.name] = got[0]
    assert _nodes(door) == _nodes(declared)
    assert [n[0] for n in _nodes(door)] == ["n1", "n2", "n3"]
    expected = [c for c in _CASES if c.taken or (not tokens and c.name.startswith(("no token", "a wrong", "a token")))]
    assert taken == [c.node for c in expected], statuses
    assert statuses["well-formed"] == statuses["a stale push"] == 200
    assert statuses["a node past MAX_NODES"] == 429 and statuses["the writer backlogged"] == 503
    assert statuses["queued past the bound"] == 503 and statuses["a body that never comes"] == 408
    if tokens:
        assert statuses["no token"] == 401 and statuses["a token without the nodes scope"] == 403
    audited = door.get("/metrics").text
    token = "exporters" if tokens else "anonymous"
    assert f'mfumon_token_writes_total{{token_name="{token}",endpoint="node_samples",outcome="accepted"}}' in audited


def test_the_accepted_answer_is_the_declared_routes(pair: Callable[..., tuple[TestClient, TestClient]]) -> None:
    """Byte for byte, headers and their order included, and the OpenAPI document is the declared route's."""
    door, declared = pair()
    case = Case("well-formed", headers={"content-type": "application/json"})
    body = push_body()
    assert _asgi(door, case, body) == _asgi(declared, case, body)
    status, headers, answer = _asgi(door, case, body)
    assert (status, answer) == (200, b'{"accepted":2,"applied":true}')
    assert headers == [(b"content-length", b"29"), (b"content-type", b"application/json")]
    assert door.app.openapi() == declared.app.openapi()  # type: ignore[attr-defined]


def _gate_pending_during_push(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    ingest = fast_door.ingest_push
    gate = client.app.state.ingest_gate  # type: ignore[attr-defined]

    def watched(*args: Any, **kwargs: Any) -> bytes | None:
        seen.append(gate.pending)
        return ingest(*args, **kwargs)

    monkeypatch.setattr(fast_door, "ingest_push", watched)
    return seen


def test_a_push_the_server_door_counted_is_not_counted_again(make_client, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Under ``mfumon serve`` the connection's door counts each ingest request in flight as its head is parsed
    (``gate.door``); the fast door then only ends that count, once, as IngestLimit does."""
    client: TestClient = make_client()
    gate = client.app.state.ingest_gate  # type: ignore[attr-defined]
    seen = _gate_pending_during_push(client, monkeypatch)
    headers = {"content-type": "application/json"}
    assert client.post("/v1/nodes/n1/samples", content=push_body(), headers=headers).status_code == 200
    assert seen == [1] and gate.pending == 0  # counted by the fast door itself
    gate.door, gate.pending = True, 2  # this request and another, counted as their heads were parsed
    assert client.post("/v1/nodes/n1/samples", content=push_body(), headers=headers).status_code == 200
    assert seen == [1, 2] and gate.pending == 1
    declined = client.post("/v1/nodes/n1/samples", content=b"[]", headers=headers)  # IngestLimit ends this one
    assert declined.status_code == 422 and gate.pending == 0


def test_the_door_stands_in_for_every_middleware_of_the_app(make_client) -> None:  # type: ignore[no-untyped-def]
    """A middleware added to the app must be added to what the door stands in for (with its effect on a push):
    otherwise the app does not build."""
    client: TestClient = make_client()
    app: Any = client.app
    assert [m.cls for m in app.user_middleware] == list(STANDS_IN_FOR)  # outermost first
    layer = app.middleware_stack
    while not isinstance(layer, FastDoor):
        layer = layer.app

    class Extra:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await self.app(scope, receive, send)

    for position in (0, len(app.user_middleware)):
        extended = create_app(Settings(DATABASE_URL="sqlite://"))
        middleware: Any = type(extended.user_middleware[0])  # starlette's Middleware, typed for a factory
        extended.user_middleware.insert(position, middleware(Extra))
        with pytest.raises(TypeError, match="STANDS_IN_FOR"):
            extended.build_middleware_stack()


def test_before_the_app_started_a_push_is_refused_as_by_admission() -> None:
    """Before startup there is no context to take a push into: the door leaves it to admission's 503."""
    answers = []
    for app in (create_app(Settings(DATABASE_URL="sqlite://")), _without_door(create_app(Settings()))):
        response = TestClient(app).post("/v1/nodes/n1/samples", content=push_body(), headers=GOOD)  # no lifespan
        answers.append((response.status_code, response.content, response.headers.items()))
    assert answers[0] == answers[1] and answers[0][0] == 503
