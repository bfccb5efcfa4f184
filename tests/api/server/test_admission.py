"""Admission on the head: the token and the declared body size decide before any body is read (issue 28 #1, #2).

In-process (the ``Admit`` middleware, as under any ASGI server) and against the route table itself; the door of
``mfumon serve`` is tested in ``tests/api/server/test_admission_live.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import Match

from mfumon.api.core.security import TokenVerifier, parse_tokens
from mfumon.api.main import create_app
from mfumon.api.route_table import NODE_SAMPLES, READ_METHODS, RouteTable, route_spec, spec_of
from mfumon.api.server.admission import ANY_TOKEN, Admission, Refusal, required_scope
from tests.utils.factories import metric_value, node_sample, report, scrape

TOKEN = "admission-test-token-0123456789"
NODES_ONLY = "nodes-only-token-0123456789abc"
TOKENS = f"{TOKEN},{NODES_ONLY} name=exporters scopes=nodes"


def _declared_scope(route: APIRoute) -> str | None:
    """The scope a route's dependencies check (``require_<scope>_scope``), or None."""
    names = [d.call.__name__ for d in route.dependant.dependencies if d.call is not None]
    names += [d.call.__name__ for dep in route.dependant.dependencies for d in dep.dependencies if d.call is not None]
    scopes = {m.group(1) for n in names if (m := re.fullmatch(r"require_(\w+)_scope", n))}
    assert len(scopes) <= 1, (route.path, scopes)
    return next(iter(scopes), None)


def _example_path(template: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", template)


def _app_routes() -> tuple[FastAPI, list[RouteContext]]:
    app = create_app()
    return app, [c for c in iter_route_contexts(app.routes) if isinstance(c.original_route, APIRoute)]


def _routed(app: FastAPI, method: str, path: str) -> RouteContext | None:
    """The route FastAPI's own router takes for ``method path`` (a full match, first in order), or None."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for context in iter_route_contexts(app.routes):
        if context.matches(scope)[0] is Match.FULL:
            return context
    return None


def test_every_write_route_declares_its_spec_and_its_scope_is_the_one_it_checks() -> None:
    app, contexts = _app_routes()
    writes = 0
    for context in contexts:
        route = context.original_route
        assert isinstance(route, APIRoute)
        spec = spec_of(route.endpoint)
        if route.methods <= READ_METHODS:
            assert spec is None, f"{route.path}: a read declares no spec (reads need the read scope)"
            continue
        writes += 1
        assert spec is not None, f"{route.methods} {route.path} declares no RouteSpec"
        assert spec.scope == _declared_scope(route), (route.path, spec, _declared_scope(route))
    assert writes >= 11  # node samples, job writes, profiles, scheduler sync, baselines, remediations
    assert app.state.routes.match("POST", "/v1/nodes/n1/samples").endpoint == NODE_SAMPLES


def test_a_route_without_a_spec_fails_at_start_up() -> None:
    router = APIRouter()

    @router.post("/nothing")
    def nothing() -> None: ...

    with pytest.raises(ValueError, match="/nothing declares no RouteSpec"):
        RouteTable.compile(router.routes)


_NEAR_MISSES = (
    "/v1/nodes/n1/samples/",
    "/v1/nodes//samples",
    "/v1/nodes/n1/sample",
    "/v1/nodes/n1/samples\n",
    "/v1/jobs/j1/",
    "/v1/jobs/j1/reports/x",
    "/v1/jobs/",
    "/v1/jobs",
    "/v1/jobs/j1/profile/",
    "/v1/scheduler",
    "/v1/scheduler/a/b",
    "/v1/baselines",
    "/v1/baselines/",
    "/v1/baselines/a/b/c",
    "/v1/remediations/",
    "/v1/remediation",
    "/v1/nothing",
    "/",
    "",
)


def test_the_compiled_matcher_agrees_with_fastapis_routing() -> None:
    app, contexts = _app_routes()
    table: RouteTable = app.state.routes
    paths = {_example_path(c.path) for c in contexts} | set(_NEAR_MISSES)
    methods = {m for c in contexts for m in c.methods} | {"PATCH"}
    checked = 0
    for method in sorted(methods):
        for path in sorted(paths):
            routed = _routed(app, method, path)
            wanted = None if routed is None or method in READ_METHODS else spec_of(routed.endpoint)
            assert table.match(method, path) == wanted, (method, path)
            checked += wanted is not None
    assert checked >= 11


def test_a_write_to_no_known_route_still_needs_a_token() -> None:
    app, _ = _app_routes()
    routes = app.state.routes
    assert required_scope("POST", "/v1/nothing", reads_need_token=False, routes=routes) == ANY_TOKEN
    assert required_scope("PATCH", "/v1/jobs/x", reads_need_token=False, routes=routes) == ANY_TOKEN
    assert required_scope("GET", "/v1/jobs", reads_need_token=False, routes=routes) is None
    assert required_scope("GET", "/v1/jobs", reads_need_token=True, routes=routes) == "read"
    assert required_scope("GET", "/healthz", reads_need_token=True, routes=routes) is None
    assert required_scope("PUT", "/v1/scheduler/s", reads_need_token=False, routes=routes) == "scheduler"


def _admission(reads: bool = False) -> Admission:
    verifier = TokenVerifier(parse_tokens(TOKENS.split(","), []))
    big = APIRouter()

    @big.post("/big")
    @route_spec("jobs", max_body_bytes="MAX_SCHEDULER_BODY_BYTES")
    def take_big() -> None: ...

    routes = RouteTable.compile([*big.routes, *_app_routes()[0].routes])
    limits = {"MAX_SCHEDULER_BODY_BYTES": 4096}
    return Admission(verifier, reads_need_token=reads, max_body_bytes=1024, routes=routes, body_limits=limits)


def test_admission_decides_on_the_head_alone() -> None:
    admission = _admission()
    missing = admission.check("POST", "/v1/jobs/j/reports", None, "10")
    assert isinstance(missing, Refusal) and missing.status == 401
    wrong_scope = admission.check("POST", "/v1/jobs/j/reports", f"Bearer {NODES_ONLY}", "10")
    assert isinstance(wrong_scope, Refusal) and wrong_scope.status == 403 and "'jobs'" in wrong_scope.detail
    too_large = admission.check("POST", "/v1/jobs/j/reports", f"Bearer {TOKEN}", "1025")
    assert isinstance(too_large, Refusal) and too_large.status == 413
    unauthenticated_and_large = admission.check("POST", "/v1/jobs/j/reports", None, "99999999")
    assert isinstance(unauthenticated_and_large, Refusal) and unauthenticated_and_large.status == 401
    ok = admission.check("POST", "/v1/jobs/j/reports", f"Bearer {TOKEN}", "1024")
    assert not isinstance(ok, Refusal) and ok is not None and ok.name == "env-1"
    assert admission.check("GET", "/v1/jobs", None, None) is None  # reads are open unless configured
    assert admission.body_limit("POST", "/big") == 4096 and admission.body_limit("PUT", "/v1/jobs/j") == 1024
    assert admission.body_limit("GET", "/big") == 1024  # the limit is the route's: method and path
    reads = _admission(reads=True).check("GET", "/metrics", None, None)
    assert isinstance(reads, Refusal) and reads.status == 401
    assert all(h[0] != b"connection" or h[1] == b"close" for h in missing.response_headers())


@pytest.fixture
def tokened(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(INGEST_TOKENS=TOKENS)


def test_an_unauthenticated_report_is_401_whatever_its_body(tokened: TestClient) -> None:
    for body in (b"{", b"not json at all", json.dumps(report()).encode()):
        answer = tokened.post("/v1/jobs/j1/reports", content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.headers["connection"] == "close"
    assert tokened.get("/v1/jobs/j1").status_code == 404  # nothing was stored
    unauthorized = metric_value(
        scrape(tokened), "mfumon_ingest_requests_total", endpoint="job_reports", outcome="unauthorized"
    )
    assert unauthorized == 3


def test_every_write_route_refuses_before_parsing(tokened: TestClient) -> None:
    """The whole class: each write route answers 401 to a broken body without a token, 403 with a token without
    its scope (never 422, which would mean the body was read first)."""
    routes = [
        ("POST", "/v1/nodes/n1/samples"),
        ("POST", "/v1/jobs/j1/reports"),
        ("POST", "/v1/jobs/j1/end"),
        ("POST", "/v1/jobs/j1/events"),
        ("PUT", "/v1/jobs/j1"),
        ("PUT", "/v1/scheduler/slurm"),
        ("PUT", "/v1/baselines/sig"),
        ("DELETE", "/v1/baselines/sig"),
        ("POST", "/v1/no-such-route"),
    ]
    for method, path in routes:
        answer = tokened.request(method, path, content=b"{", headers={"content-type": "application/json"})
        assert answer.status_code == 401, (method, path, answer.text)
        scoped = tokened.request(
            method,
            path,
            content=b"{",
            headers={"content-type": "application/json", "authorization": f"Bearer {NODES_ONLY}"},
        )
        expected = 422 if path.startswith("/v1/nodes") else 404 if "no-such" in path else 403
        assert scoped.status_code == expected, (method, path, scoped.text)


def test_a_declared_body_over_the_route_limit_is_413_before_reading(make_client: Callable[..., TestClient]) -> None:
    client = make_client(INGEST_TOKENS=TOKENS, MAX_BODY_BYTES=2048, MAX_SCHEDULER_BODY_BYTES=4096)
    auth = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    big = b" " * 3000 + json.dumps(node_sample(1)).encode()
    assert client.post("/v1/nodes/n1/samples", content=big, headers=auth).status_code == 413
    assert client.get("/v1/nodes/n1").status_code == 404
    # the scheduler's own, larger limit: 3,000 bytes get past admission (and are then read and validated)
    sync = client.put("/v1/scheduler/slurm", content=b" " * 3000 + b"{}", headers=auth)
    assert sync.status_code == 422, sync.text
    assert client.put("/v1/scheduler/slurm", content=b" " * 5000 + b"{}", headers=auth).status_code == 413


def test_reads_need_the_read_scope_when_configured(make_client: Callable[..., TestClient]) -> None:
    client = make_client(INGEST_TOKENS=f"{TOKEN},{NODES_ONLY} name=exporters scopes=nodes", READ_REQUIRES_TOKEN=True)
    assert client.get("/v1/jobs").status_code == 401
    assert client.get("/metrics").status_code == 401
    assert client.get("/v1/jobs", headers={"authorization": f"Bearer {NODES_ONLY}"}).status_code == 403
    assert client.get("/v1/jobs", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/healthz").status_code == 200


def test_without_tokens_nothing_is_refused_for_want_of_one(client: TestClient) -> None:
    assert client.post("/v1/jobs/j1/reports", json=report()).status_code == 200
