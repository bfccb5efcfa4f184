"""Admission: what a request must show before any of its body is read, and the refusal when it does not.

FastAPI reads and parses a request's body before it solves the route's dependencies, so a token checked in a
dependency is checked too late: an unauthenticated client could make the server read, hold and parse a 60 MB body
(and take one of the in-flight ingest slots while it trickled in) only to be told 401 afterwards. Here the head
alone decides, from the method, the path, ``Authorization``, ``Content-Length`` and ``Transfer-Encoding``:

- **one framing**: a head with both ``Content-Length`` and ``Transfer-Encoding`` gets 400 and its connection is
  closed (RFC 9112, section 6.1: it may be an attempt at request smuggling);
- **a token with the route's scope** (its :class:`~mfumon.api.route_table.RouteSpec`, matched by the app's
  :class:`~mfumon.api.route_table.RouteTable`): 401 for a missing or wrong token, 403 for one without
  the scope. Every write needs a token once tokens are configured, a route with no entry here included (it then
  gets its 404 or 405 only after the token passed); reads need the ``read`` scope when ``READ_REQUIRES_TOKEN`` is on;
  the probes never need one.
- **a body within the route's limit** (the setting its spec's ``max_body_bytes`` names): 413 for a ``Content-Length``
  over it (a chunked body is counted as it arrives, :class:`mfumon.api.middleware.BodySizeLimit`).

``mfumon serve`` applies it at the door (:class:`mfumon.api.server.protocol.GuardedH11Protocol`), in the callback that
parsed the head: a refused request costs no task, no in-flight slot and no body, and its connection is closed. Under
another server (or the test client) :class:`Admit`, the outermost middleware, applies the same rule before anything
else. The node push's fast door (:mod:`mfumon.api.server.fast_door`), just outside it, asks :meth:`Admit.verdict`
first and leaves every refusal to :class:`Admit`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from mfumon.api.core.security import Principal, TokenVerifier
from mfumon.api.route_table import READ_METHODS, RouteSpec, RouteTable

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
"""Probes: never need a token, whatever the settings."""

ANY_TOKEN = ""
"""The scope of a write to no known route: any valid token (then the router answers 404 or 405)."""


def required_scope(method: str, path: str, *, reads_need_token: bool, routes: RouteTable) -> str | None:
    """The scope a request needs (:data:`ANY_TOKEN` for any valid token), or None when it needs no token."""
    spec = None if method in READ_METHODS else routes.match(method, path)
    return _scope_needed(method, path, reads_need_token, spec)


def _scope_needed(method: str, path: str, reads_need_token: bool, spec: RouteSpec | None) -> str | None:
    if path in OPEN_PATHS:
        return None
    if method in READ_METHODS:
        return "read" if reads_need_token else None
    return ANY_TOKEN if spec is None else spec.scope


@dataclass(frozen=True, slots=True)
class Refusal:
    """The answer to a request refused on its head: status, JSON detail and extra headers."""

    status: int
    detail: str
    reason: str  # "unauthorized", "forbidden", "too_large" or "invalid": the ingest counter's outcome
    headers: tuple[tuple[bytes, bytes], ...] = ()

    def body(self) -> bytes:
        return json.dumps({"detail": self.detail}).encode()

    def response_headers(self) -> list[tuple[bytes, bytes]]:
        """Headers of the refusal, ``Connection: close`` included: the body that may follow is never read."""
        return [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self.body())).encode()),
            (b"connection", b"close"),
            *self.headers,
        ]


_UNAUTHORIZED = Refusal(
    401,
    "missing or invalid token (Authorization: Bearer <token>; see MFUMON_INGEST_TOKENS)",
    "unauthorized",
    ((b"www-authenticate", b"Bearer"),),
)


_AMBIGUOUS_FRAMING = Refusal(
    400,
    "a request must not have both Content-Length and Transfer-Encoding (RFC 9112, section 6.1)",
    "invalid",
)
"""Such a message may be an attempt at request smuggling: answered and its connection closed, never served."""

_NOT_STARTED = Refusal(503, "the aggregator is starting; retry", "unavailable", ((b"retry-after", b"1"),))


class Admission:
    """The head-only checks: a token with the route's scope and a declared body within the route's limit."""

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        reads_need_token: bool,
        max_body_bytes: int,
        routes: RouteTable,
        body_limits: Mapping[str, int] | None = None,
    ) -> None:
        self.verifier = verifier
        self.reads_need_token = reads_need_token
        self.max_body_bytes = max_body_bytes
        self.routes = routes
        self.body_limits = body_limits or {}  # setting name -> bytes, for a spec's ``max_body_bytes``

    def body_limit(self, method: str, path: str) -> int:
        """The most bytes a request body to ``method path`` may have."""
        return self._limit(self.routes.match(method, path))

    def _limit(self, spec: RouteSpec | None) -> int:
        return self.max_body_bytes if spec is None else self.body_limits.get(spec.max_body_bytes, self.max_body_bytes)

    def check(
        self,
        method: str,
        path: str,
        authorization: str | None,
        content_length: str | None,
        transfer_encoding: bool = False,
    ) -> Principal | Refusal | None:
        """The principal of a request that presented a token it needs, None for one that needs none, or why not.
        ``transfer_encoding``: the head has a ``Transfer-Encoding`` (with a ``Content-Length`` too: 400)."""
        if transfer_encoding and content_length is not None:
            return _AMBIGUOUS_FRAMING
        principal: Principal | None = None
        spec = None if method in READ_METHODS else self.routes.match(method, path)  # one match per request
        scope = _scope_needed(method, path, self.reads_need_token, spec)
        if scope is not None and self.verifier.required:
            principal = self.verifier.principal(authorization)
            if principal is None:
                return _UNAUTHORIZED
            if scope != ANY_TOKEN and not principal.allows(scope):
                has = ", ".join(sorted(principal.scopes)) or "none"
                return Refusal(403, f"token {principal.name!r} lacks the {scope!r} scope (it has: {has})", "forbidden")
        if content_length is not None:
            limit = self._limit(spec)
            if not content_length.isdigit() or int(content_length) > limit:
                return Refusal(413, f"request body exceeds {limit} bytes (this route's limit)", "too_large")
        return principal


class Admit:
    """The admission check as the outermost middleware: a refused request gets its answer before any other
    middleware or the app sees it, and its body is never read. An admitted one carries its principal in
    ``scope["state"]``, which the route's scope dependency and the write audit then use."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        admission: Callable[[], Admission | None],
        on_refused: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.app = app
        self.admission = admission  # built with the app's tokens; None until then (nothing is admitted)
        self.on_refused = on_refused  # (method, path, reason) of each refusal, for the ingest counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verdict = self.verdict(scope)
        if isinstance(verdict, Refusal):
            if self.on_refused is not None and verdict is not _NOT_STARTED:
                self.on_refused(scope["method"], scope["path"], verdict.reason)
            await self._send(send, verdict)
            return
        await self.app(scope, receive, send)

    def verdict(self, scope: Scope) -> Principal | Refusal | None:
        """:meth:`Admission.check` on a request's head; an admitted principal is kept in ``scope["state"]``.
        Counts nothing: :class:`mfumon.api.server.fast_door.FastDoor` asks too, and leaves a refusal to this
        middleware."""
        admission = self.admission()
        if admission is None:  # the app has not started (its tokens are read at startup): admit nothing
            return _NOT_STARTED
        authorization = content_length = None
        transfer_encoding = False
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-length":
                content_length = value.decode("latin-1")
            elif name == b"transfer-encoding":
                transfer_encoding = True
        verdict = admission.check(scope["method"], scope["path"], authorization, content_length, transfer_encoding)
        if verdict is not None and not isinstance(verdict, Refusal):
            scope.setdefault("state", {})["principal"] = verdict
        return verdict

    @staticmethod
    async def _send(send: Send, refusal: Refusal) -> None:
        await send({"type": "http.response.start", "status": refusal.status, "headers": refusal.response_headers()})
        await send({"type": "http.response.body", "body": refusal.body()})
