"""The node push's fast path (``mfumon.api.routes.nodes.well_formed_push``) answers only what needs no error.

Everything it declines goes to FastAPI's handler, whose answers the rest of the suite pins down (validation, tokens,
scopes, limits); here: that it declines every kind of request that needs an error, and that what it answers is the
same push FastAPI would have taken.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi import Response
from fastapi.testclient import TestClient
from starlette.types import Message

from mfumon.api.core.config import Settings
from mfumon.api.main import create_app
from mfumon.api.routes._one_pass import FastPath, _OnePassRequest
from mfumon.api.routes.nodes import well_formed_push
from mfumon.api.schemas.nodes import NodeSampleCreate
from tests.utils.factories import node_sample

TOKENS = """\
exporter-secret  name=exporters scopes=nodes
jobs-secret      name=jobs      scopes=jobs
"""
GOOD = {"content-type": "application/json", "authorization": "Bearer exporter-secret"}


@pytest.fixture
def client(make_client, tmp_path: Path) -> TestClient:  # type: ignore[no-untyped-def]
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    return make_client(INGEST_TOKENS_FILE=path)  # type: ignore[no-any-return]


def _offer(client: TestClient, node: str, body: bytes, headers: dict[str, str], length: bool = True) -> Response | None:
    """What the fast path does with one request, driven directly (no HTTP client in between)."""
    sent = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        return sent.pop(0) if sent else {"type": "http.disconnect"}

    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    if length:
        raw.append((b"content-length", str(len(body)).encode()))
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": f"/v1/nodes/{node}/samples",
        "headers": raw,
        "path_params": {"node": node},
        "app": client.app,
        "state": {},
    }
    request = _OnePassRequest(scope, receive, NodeSampleCreate)
    return client.portal.call(well_formed_push, request)  # type: ignore[union-attr]


def _body(**counters: Any) -> bytes:
    return json.dumps(node_sample(2, **counters)).encode()


def test_awell_formed_push_is_answered_and_taken(client: TestClient) -> None:
    response = _offer(client, "n1", _body(power_watts=321.0), GOOD)
    assert response is not None and response.status_code == 200
    assert json.loads(response.body) == {"accepted": 2, "applied": True}
    gpus = client.get("/v1/nodes/n1").json()["gpus"]
    assert [g["counters"]["power_watts"] for g in gpus] == [321.0, 321.0]
    metrics = client.get("/metrics").text
    assert 'mfumon_ingest_requests_total{endpoint="node_samples",outcome="accepted"} 1' in metrics


@pytest.mark.parametrize(
    ("case", "node", "body", "headers", "length"),
    [
        ("no token", "n1", _body(), {"content-type": "application/json"}, True),
        ("wrong token", "n1", _body(), {**GOOD, "authorization": "Bearer nope"}, True),
        ("token without the nodes scope", "n1", _body(), {**GOOD, "authorization": "Bearer jobs-secret"}, True),
        ("not JSON by its content type", "n1", _body(), {**GOOD, "content-type": "text/plain"}, True),
        ("JSON with parameters", "n1", _body(), {**GOOD, "content-type": "application/json; charset=utf-8"}, True),
        ("chunked (no Content-Length)", "n1", _body(), GOOD, False),
        ("invalid JSON", "n1", b'{"timestamp": ', GOOD, True),
        ("empty body", "n1", b"", GOOD, True),
        ("body that does not validate", "n1", _body(utilization=1.5), GOOD, True),
        ("node name with a space", "bad node", _body(), GOOD, True),
        ("node name ending in a newline", "n1\n", _body(), GOOD, True),
        ("node name too long", "n" * 129, _body(), GOOD, True),
    ],
)
def test_anything_that_needs_an_error_is_left_to_fastapi(
    client: TestClient, case: str, node: str, body: bytes, headers: dict[str, str], length: bool
) -> None:
    assert _offer(client, node, body, headers, length) is None, case
    assert client.get("/v1/nodes").json()["count"] == 0  # and it changed nothing
    assert "outcome=" not in "".join(
        line for line in client.get("/metrics").text.splitlines() if 'endpoint="node_samples"' in line
    )  # nor counted anything: FastAPI's handler counts it once


def test_over_http_both_paths_answer_alike(client: TestClient) -> None:
    """The same push through the fast path and, with a content type it declines, through FastAPI's handler."""
    fast = client.post("/v1/nodes/a/samples", content=_body(), headers=GOOD)
    slow = client.post(
        "/v1/nodes/b/samples", content=_body(), headers={**GOOD, "content-type": "application/json; charset=utf-8"}
    )
    assert fast.status_code == slow.status_code == 200
    assert fast.json() == slow.json() and fast.headers["content-type"] == slow.headers["content-type"]
    a, b = client.get("/v1/nodes/a").json(), client.get("/v1/nodes/b").json()
    assert [g["counters"] for g in a["gpus"]] == [g["counters"] for g in b["gpus"]]
    audited = 'mfumon_token_writes_total{token_name="exporters",endpoint="node_samples",outcome="accepted"} 2'
    assert audited in client.get("/metrics").text  # the fast path names its token for the write audit too
    newline = client.post("/v1/nodes/n1%0A/samples", content=_body(), headers=GOOD)
    assert newline.status_code == 422 and newline.json()["detail"][0]["loc"] == ["path", "node"]


def _without_fast_path(database_url: str, tokens: Path, **settings: Any) -> TestClient:
    """The same app with the node push's fast path taken out: every push goes through the declared route."""
    app = create_app(Settings(DATABASE_URL=database_url, INGEST_TOKENS_FILE=tokens, **settings))
    assert isinstance(app.router.middleware_stack, FastPath)
    app.router.middleware_stack = app.router.middleware_stack.app
    return TestClient(app)


_FUTURE = {**node_sample(2), "timestamp": time.time() + 3600}
_CASES = [
    ("well-formed", "n1", _body(), GOOD),
    ("no token", "n1", _body(), {"content-type": "application/json"}),
    ("token without the nodes scope", "n1", _body(), {**GOOD, "authorization": "Bearer jobs-secret"}),
    ("not JSON by its content type", "n1", _body(), {**GOOD, "content-type": "text/plain"}),
    ("no content type (read as JSON)", "n2", _body(), {"authorization": GOOD["authorization"]}),
    ("JSON with parameters", "n3", _body(), {**GOOD, "content-type": "application/json; charset=utf-8"}),
    ("invalid JSON", "n1", b'{"timestamp": ', GOOD),
    ("empty body", "n1", b"", GOOD),
    ("a JSON array", "n1", b"[]", GOOD),
    ("a ratio out of range", "n1", _body(utilization=1.5), GOOD),
    ("a number as a string", "n1", _body(power_watts="300"), GOOD),
    ("an unknown field", "n1", json.dumps({**node_sample(2), "extra": 1}).encode(), GOOD),
    ("duplicate GPU uuids", "n1", json.dumps({**node_sample(2), "gpus": node_sample(1)["gpus"] * 2}).encode(), GOOD),
    ("node name with a space", "bad node", _body(), GOOD),
    ("node name ending in a newline", "n1%0A", _body(), GOOD),
    ("node name too long", "n" * 129, _body(), GOOD),
    ("more GPUs than a node may have", "n1", json.dumps(node_sample(3)).encode(), GOOD),
    ("a timestamp from the future", "n1", json.dumps(_FUTURE).encode(), GOOD),
    ("a body over the limit", "n1", b" " * 5000 + _body(), GOOD),
]


def test_the_fast_path_changes_neither_the_openapi_document_nor_any_answer(
    client: TestClient, database_url: str, tmp_path: Path
) -> None:
    """Issue 33 #4: the same requests to the app with and without the fast path get the same status, body and
    headers (errors from FastAPI's validation, the app's handlers, admission and the middleware alike), and both
    apps document the same route."""
    limits = {"MAX_GPUS_PER_NODE": 2, "MAX_BODY_BYTES": 4096}
    app = create_app(Settings(DATABASE_URL=database_url, INGEST_TOKENS_FILE=tmp_path / "tokens", **limits))
    fast_path = app.router.middleware_stack
    assert isinstance(fast_path, FastPath)
    answered: list[int] = []
    answer = fast_path.answer

    async def counted(request: Any) -> Response | None:
        response = await answer(request)
        answered.append(0 if response is None else response.status_code)
        return response

    fast_path.answer = counted
    statuses = {}
    with TestClient(app) as fast, _without_fast_path(database_url, tmp_path / "tokens", **limits) as declared:
        assert fast.app.openapi() == declared.app.openapi()  # type: ignore[attr-defined]
        for case, node, body, headers in _CASES:
            a = fast.post(f"/v1/nodes/{node}/samples", content=body, headers=headers)
            b = declared.post(f"/v1/nodes/{node}/samples", content=body, headers=headers)
            assert (a.status_code, a.content) == (b.status_code, b.content), case
            kept = ("content-type", "retry-after", "www-authenticate", "connection")
            assert {k: a.headers.get(k) for k in kept} == {k: b.headers.get(k) for k in kept}, case
            statuses[case] = a.status_code
        assert fast.get("/v1/nodes").json()["count"] == declared.get("/v1/nodes").json()["count"] == 3
    taken = {case for case, status in statuses.items() if status == 200}
    assert taken == {"well-formed", "no content type (read as JSON)", "JSON with parameters"}
    assert all(400 <= status < 500 for case, status in statuses.items() if case not in taken), statuses
    # The fast path answered the well-formed pushes itself (one without a content type is JSON by the time it gets
    # there); the future timestamp it took and raised for, which the app's handler answered as from the route.
    assert answered.count(200) == 2
