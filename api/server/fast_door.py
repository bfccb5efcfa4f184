"""The node push's fast door: a well-formed push answered on the raw ASGI scope, ahead of the app's middleware.

A node push is nearly all of the aggregator's requests. Through the whole stack it pays for seven middleware,
FastAPI's exception middleware, the router's matching of every route, dependency solving and Starlette's
``Request``/``Headers``/``Response`` objects: about a third of its CPU (``bench/ingest_inprocess.py``). The door
answers a push that needs no error itself, with the scope's header pairs and a pre-built answer, and hands anything
else on to the stack untouched (its first body message replayed as received), so every refusal and error still
comes from the one place it always came from.

**Where it sits.** Just outside the app's own middleware (:class:`mfumon.api.server.admission.Admit`, the outermost),
inside FastAPI's ``ServerErrorMiddleware`` and telemetry: an error nobody handles (a bug in ``record_sample``) is
still logged and answered 500, and observed, as from the route. Those cost about 2 µs a push; the door saves the
rest.

**One feature, one place.** Each middleware's effect on a taken push comes from the same function the middleware
calls (:data:`STANDS_IN_FOR` lists them; building the door fails when the app has a middleware it does not know):

- :class:`~mfumon.api.server.admission.Admit`: :meth:`~mfumon.api.server.admission.Admit.verdict` (the token with
  the ``nodes`` scope, the declared size; the principal kept in the scope's state); a refusal is declined, for
  Admit to answer and count;
- :class:`~mfumon.api.server.overload.IngestLimit`: the gate's ``refuses`` (declined; asked before the body is
  awaited, then ``reached``: the wait for the body is no queueing), ``enter`` and ``done``; under
  ``mfumon serve`` the door in :mod:`mfumon.api.server.door` counted the request already and ``enter`` knows it;
- :class:`~mfumon.api.middleware.BodyTimeout`: the first message is awaited within its deadline, which the
  middleware then keeps should the door decline; :class:`~mfumon.api.middleware.BodySizeLimit`: its ``limit``;
- :class:`~mfumon.api.middleware.WriteAudit`: :func:`~mfumon.api.middleware.audit_write` once answered;
- :class:`~mfumon.api.middleware.JsonContentType` changes nothing for ``application/json``, the only type taken,
  and :class:`~mfumon.api.middleware.ReadLimit` holds only reads.

What the route does is :func:`mfumon.api.services.ingest.ingest_push`, which the declared route calls too: it
validates, authorises and applies the push; an error it raises once the push was taken is answered by the app's own
exception handler (:mod:`mfumon.api.handlers`). This module imports no route and no route dependency.

**In place, under ``mfumon serve``.** The server's door (:mod:`mfumon.api.server.door`) hands this one a push
whose whole body came with its head, in the callback that parsed it: :meth:`FastDoor.take_in_place` takes it by the
same checks and calls, with the admission verdict the server's door reached on the head, and no ASGI cycle at all
(uvicorn's task, scope, the three outer middleware, h11's response events: another third of a push's CPU). What it
declines goes through the stack as received; an error taking it raised is handed over with the request
(:data:`~mfumon.api.server.overload.HANDED_OVER`), and this door's ASGI path answers it through the app's handler
instead of taking it again.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mfumon.api.core.security import Principal
from mfumon.api.middleware import (
    BodySizeLimit,
    BodyTimeout,
    JsonContentType,
    ReadLimit,
    WriteAudit,
    audit_write,
)
from mfumon.api.route_table import NODE_SAMPLES, endpoint_of
from mfumon.api.server.admission import Admit, Refusal
from mfumon.api.server.interface import Headers
from mfumon.api.server.overload import HANDED_OVER, IngestLimit
from mfumon.api.services.ingest import NODE_NAME, ingest_push

STANDS_IN_FOR: tuple[type, ...] = (
    Admit,
    IngestLimit,
    ReadLimit,
    BodyTimeout,
    BodySizeLimit,
    WriteAudit,
    JsonContentType,
)
"""The app's middleware whose effects the door reproduces for a push it takes (``tests/api/server/test_fast_path.py``
compares it with the app's): a middleware added to the app must be added here, with its effect, or the door cannot
be built."""

_JSON = b"application/json"
Handlers = Mapping[Any, Callable[[Request, Exception], Any]]


class FastDoor:
    """Answers a well-formed node push in place of ``app``, the outermost of the app's ``layers`` middleware;
    everything else goes on to ``app`` as received. ``handlers``: the app's exception handlers, for an error raised
    once a push is taken."""

    def __init__(self, app: ASGIApp, *, layers: int, handlers: Handlers, owner: FastAPI) -> None:
        self.app = app
        self.owner = owner  # the app, as the stack's scope carries it (its context, for the door in the server)
        self.handlers = handlers
        found = _layers(app, layers)
        self.admit: Admit = found[Admit]
        self.gate = found[IngestLimit].gate
        self.body_timeout: BodyTimeout = found[BodyTimeout]
        self.body_size: BodySizeLimit = found[BodySizeLimit]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = self._push_head(scope)
        if head is None:
            await self.app(scope, receive, send)
            return
        node, length, authorization = head
        gate = self.gate
        if gate.refuses(scope):  # queued past the bound (or, under another server, past the limit): IngestLimit answers
            await self.app(scope, receive, send)
            return
        gate.reached(scope)  # the wait for its body, if any, is no queueing: not refused for it below
        try:
            message = await self.body_timeout.receive_in_time(scope, receive)
        except asyncio.TimeoutError:  # BodyTimeout answers it, by the same deadline
            await self.app(scope, receive, send)
            return
        body = self._whole_body(scope, message, length)
        if body is None or gate.refuses(scope):
            await self.app(scope, _replaying(message, receive), send)
            return
        handed = scope.pop(HANDED_OVER, None)  # raised when the server's protocol took it in place: not taken twice
        answer: bytes | Exception | None
        gate.enter()  # in flight while it is applied
        try:
            answer = ingest_push(
                scope["app"].state.ctx, scope.setdefault("state", {}), authorization, node, body, raising=handed
            )
        except Exception as exc:
            answer = exc
        if answer is None:  # declined (the body or the token): the stack answers it, as always
            gate.leave()
            if handed is not None:
                scope[HANDED_OVER] = handed
            await self.app(scope, _replaying(message, receive), send)
            return
        await self._answer(scope, receive, send, answer)

    def take_in_place(
        self, method: str, path: str, headers: Headers, body: bytes, principal: Principal | None
    ) -> bytes | Exception | None:
        """A push whose whole body came with its head, taken by the server's protocol before any ASGI cycle
        (:mod:`mfumon.api.server.door`, under ``mfumon serve``): the answer's body (200), or the error taking it
        raised, which the server hands to this door's ASGI path with the request (:data:`HANDED_OVER`) to answer
        through the app's handler; None when this door would not take it (the stack answers it, as always).

        ``principal``: the admission's verdict, which the server's door reached on the same head (None: no token
        was needed). The in-flight slot is the server door's: it ends it once the answer is written, and the ASGI
        path ends it otherwise."""
        target = _push_target(method, path, headers)
        if target is None or len(body) != target[1]:
            return None
        state: dict[str, Any] = {} if principal is None else {"principal": principal}
        try:
            answer = ingest_push(self.owner.state.ctx, state, target[2], target[0], body)
        except Exception as exc:
            return exc
        if answer is not None:
            audit_write({"type": "http", "method": method, "path": path, "app": self.owner, "state": state}, 200)
        return answer

    def _push_head(self, scope: Scope) -> tuple[str, int, str | None] | None:
        """:func:`_push_target` of a request through the stack (no ``root_path``), if admitted."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        target = _push_target(scope["method"], scope["path"], scope["headers"])
        if target is None or isinstance(self.admit.verdict(scope), Refusal):
            return None
        return target

    def _whole_body(self, scope: Scope, message: Message, length: int) -> bytes | None:
        """The body, if it came whole in ``message``, as long as declared and within the route's limit."""
        if message["type"] != "http.request" or message.get("more_body", False):
            return None
        body: bytes = message.get("body", b"")
        return body if len(body) == length and length <= self.body_size.limit(scope) else None

    async def _answer(self, scope: Scope, receive: Receive, send: Send, answer: bytes | Exception) -> None:
        """Answer a push taken (its gate entered), with each middleware's effect: ``answer``, the body of its 200, or
        the error taking it raised, through its handler."""
        gate, status = self.gate, 500
        try:
            if isinstance(answer, Exception):
                status = await self._handle(scope, receive, send, answer)
                return
            headers = [(b"content-length", str(len(answer)).encode()), (b"content-type", _JSON)]
            status = 200  # as WriteAudit records it: once the answer is begun
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
        finally:
            audit_write(scope, status)
            gate.done()

    async def _handle(self, scope: Scope, receive: Receive, send: Send, exc: Exception) -> int:
        """Answer ``exc`` with the app's handler for it (as its exception middleware would; every one of the app's
        is a coroutine, which Starlette also awaits on the event loop); its status. Re-raised when none handles it,
        for FastAPI's error middleware to log and answer 500, as from the route."""
        handler = _handler_for(self.handlers, exc)
        if handler is None:
            raise exc
        response = handler(Request(scope, receive), exc)
        if inspect.isawaitable(response):
            response = await response
        assert isinstance(response, Response)
        await response(scope, receive, send)
        return response.status_code


def _push_target(method: str, path: str, headers: Headers) -> tuple[str, int, str | None] | None:
    """Node, declared length and ``Authorization`` of a push whose head needs no error: the route, a valid node
    name, ``application/json`` exactly, a ``Content-Length``."""
    if endpoint_of(method, path) != NODE_SAMPLES:  # the route table's push route: /v1/nodes/{node}/samples
        return None
    parts = path.split("/")
    if len(parts) != 5 or parts[4] != "samples" or NODE_NAME.fullmatch(node := parts[3]) is None:
        return None
    content_type = length = authorization = None
    for name, value in headers:
        if name == b"content-type":
            content_type = value if content_type is None else b""
        elif name == b"content-length":
            length = value if length is None else b""
        elif name == b"authorization":
            authorization = value.decode("latin-1")
    if content_type != _JSON or length is None or not length.isdigit():
        return None
    return node, int(length), authorization


def _layers(app: ASGIApp, count: int) -> dict[type, Any]:
    """The ``count`` middleware from ``app`` inwards (the app's own), by class: each one of :data:`STANDS_IN_FOR`."""
    found: dict[type, Any] = {}
    layer: Any = app
    for _ in range(count):
        if type(layer) not in STANDS_IN_FOR or type(layer) in found:
            raise TypeError(f"the fast door does not stand in for {type(layer).__name__}: add it to STANDS_IN_FOR")
        found[type(layer)] = layer
        layer = layer.app
    missing = [cls.__name__ for cls in STANDS_IN_FOR if cls not in found]
    if missing:
        raise TypeError(f"the app lacks middleware the fast door stands in for: {', '.join(missing)}")
    return found


def _handler_for(handlers: Handlers, exc: Exception) -> Callable[[Request, Exception], Any] | None:
    """The handler Starlette's exception middleware would pick: by status for an HTTP error, else by class."""
    if isinstance(exc, HTTPException) and exc.status_code in handlers:
        return handlers[exc.status_code]
    for cls in type(exc).__mro__:
        if cls in handlers and cls is not Exception:
            return handlers[cls]
    return None


def _replaying(first: Message, receive: Receive) -> Receive:
    """``receive`` with ``first``, already received, handed out again first."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def install(app: FastAPI, stack: ASGIApp) -> ASGIApp:
    """Put a :class:`FastDoor` in ``stack`` (what ``app.build_middleware_stack`` returned) just outside the app's own
    middleware: inside FastAPI's error and telemetry middleware, which then see the door's errors as the route's."""
    outermost: Any = app.user_middleware[0].cls
    outer: Any = stack
    while not isinstance(outer.app, outermost):
        outer = outer.app
    handlers = {key: handler for key, handler in app.exception_handlers.items() if key not in (500, Exception)}
    outer.app = door = FastDoor(outer.app, layers=len(app.user_middleware), handlers=handlers, owner=app)
    app.state.fast_door = door  # for the server's door (mfumon.api.server.door), which takes pushes in place
    return stack
