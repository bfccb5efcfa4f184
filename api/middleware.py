"""ASGI middleware: bodies too large or too slow are refused before anything parses them; writes are audited by
token name; a JSON body sent without its content type is read as JSON."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mfumon.api.errors import BodyTooLarge
from mfumon.api.route_table import READ_METHODS, endpoint_of

audit_logger = logging.getLogger("api.audit")


def endpoint_label(scope: Scope) -> str:
    """The ingest endpoint name, else ``METHOD /route/{template}`` (bounded: one per route, never the raw path)."""
    method, path = scope["method"], scope["path"]
    named = endpoint_of(method, path)
    if named is not None:
        return named
    route = scope.get("route")
    return f"{method} {getattr(route, 'path', 'unmatched')}"


class WriteAudit:
    """After each write that a token passed: one ``api.audit`` log line naming the token (never the token itself)
    and the request's outcome, and a count per token name and endpoint in ``/metrics``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in READ_METHODS:
            await self.app(scope, receive, send)
            return
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            audit_write(scope, status)


def audit_write(scope: Scope, status: int) -> None:
    """:class:`WriteAudit`'s effect, once a write a token passed is answered ``status`` (500 if it never was):
    the count per token name, endpoint and outcome, and the log line. Also called by the fast door."""
    principal = (scope.get("state") or {}).get("principal")
    ctx = getattr(scope["app"].state, "ctx", None) if "app" in scope else None
    if principal is not None and ctx is not None:
        outcome = "accepted" if status < 400 else "rejected" if status < 500 else "failed"
        ctx.self_metrics.count_token_write(principal.name, endpoint_label(scope), outcome)
        if ctx.settings.AUDIT_LOG:
            path = scope["path"] if scope["path"].isprintable() else ascii(scope["path"])  # one line each
            audit_logger.info("%s %s by token %s: %d", scope["method"], path, principal.name, status)


class ReadLimit:
    """At most ``max_concurrent`` reads in work at once, so list requests cannot take the threads and the CPU that
    ingest needs; ``/metrics`` has slots of its own so API reads never delay a scrape, and the probes are never held.

    A read waits up to ``wait_s`` for a slot, then gets 503 with Retry-After. The slot is held while the answer is
    computed, not while a slow client downloads it.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_concurrent: int,
        wait_seconds: float,
        on_rejected: Callable[[str], None] | None = None,
        scrape_slots: int = 2,
        exempt: frozenset[str] = frozenset({"/healthz", "/readyz"}),
    ) -> None:
        self.app = app
        self.wait_seconds = wait_seconds
        self.on_rejected = on_rejected
        self.exempt = exempt
        self._slots = {"api": max_concurrent, "metrics": scrape_slots}
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD") or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        group = "metrics" if scope["path"] == "/metrics" else "api"
        semaphore = self._semaphores.get(group)
        if semaphore is None:  # created in the server's event loop
            semaphore = self._semaphores[group] = asyncio.Semaphore(self._slots[group])
        try:
            await asyncio.wait_for(semaphore.acquire(), self.wait_seconds)
        except asyncio.TimeoutError:
            if self.on_rejected is not None:
                self.on_rejected(group)
            await _send_json(
                send, 503, {"detail": "too many reads in progress, retry"}, headers=[(b"retry-after", b"1")]
            )
            return
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                semaphore.release()

        async def releasing_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()  # computed: a slow download does not hold the slot
            await send(message)

        try:
            await self.app(scope, receive, releasing_send)
        finally:
            release()


_T = TypeVar("_T")

if sys.version_info >= (3, 11):

    async def _within(awaitable: Awaitable[_T], seconds: float) -> _T:
        """``await`` with a deadline; unlike ``asyncio.wait_for`` before 3.12, no task and no trip through the
        event loop when the awaitable is ready (a body that came with its head: nearly every push)."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python 3.10
    _within = asyncio.wait_for


async def _in_time(receive: Receive, seconds: float) -> Message:
    """``receive()`` within ``seconds``. A message already there (a body that came with its head: nearly every
    push) is taken at once, with no timer armed and cancelled (about a tenth of a push's CPU outside the app);
    otherwise the wait it began goes on under the deadline."""
    waiting = receive().__await__()
    try:
        signal = waiting.send(None)
    except StopIteration as done:
        message: Message = done.value
        return message
    return await _within(_resumed(waiting, signal), seconds)


@types.coroutine
def _resumed(waiting: Generator[Any, None, Message], signal: Any) -> Generator[Any, Any, Message]:
    """The rest of ``waiting``, an await suspended on ``signal`` (what it gave the event loop to wait for), as if
    it had never been interrupted: a cancellation (the deadline) is thrown in where it waits."""
    while True:
        try:
            yield signal
        except BaseException as exc:
            try:
                signal = waiting.throw(exc)
            except StopIteration as done:
                return done.value
            continue
        try:
            signal = waiting.send(None)
        except StopIteration as done:
            return done.value


BODY_DEADLINE = "mfumon.body_deadline"  # scope key: time.monotonic() by which the body must have come


class BodyTimeout:
    """408 (and the connection closed) when a request body does not arrive within ``timeout_s`` of its head.

    A Content-Length longer than the body sent, or a body trickled byte by byte, otherwise holds a worker forever.
    On a timeout the 408 goes out at once and the application sees a disconnect; whatever it answers is dropped.
    """

    def __init__(self, app: ASGIApp, timeout_seconds: float, on_timeout: Callable[[], None] | None = None) -> None:
        self.app = app
        self.timeout_seconds = timeout_seconds
        self.on_timeout = on_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        responded = timed_out = body_done = False

        async def timed_receive() -> Message:
            nonlocal timed_out, body_done
            if timed_out:
                return {"type": "http.disconnect"}
            if body_done:  # only waiting for a disconnect now: no deadline
                return await receive()
            try:
                message = await self.receive_in_time(scope, receive)
                body_done = message["type"] != "http.request" or not message.get("more_body", False)
                return message
            except asyncio.TimeoutError:
                timed_out = True
                if not responded:
                    await _send_json(send, 408, {"detail": "the request body did not arrive in time"}, close=True)
                    if self.on_timeout is not None:
                        self.on_timeout()
                return {"type": "http.disconnect"}

        async def guarded_send(message: Message) -> None:
            nonlocal responded
            if timed_out:
                return  # the 408 went out already
            responded = True
            await send(message)

        await self.app(scope, timed_receive, guarded_send)

    def deadline(self, scope: Scope) -> float:
        """When the body must have come: ``timeout_seconds`` after whoever first waited for it (this middleware or
        the fast door ahead of it, which then leaves the request here) began to."""
        deadline: float = scope.setdefault(BODY_DEADLINE, time.monotonic() + self.timeout_seconds)
        return deadline

    async def receive_in_time(self, scope: Scope, receive: Receive) -> Message:
        """The next message, or ``asyncio.TimeoutError`` past the deadline."""
        return await _in_time(receive, max(0.0, self.deadline(scope) - time.monotonic()))


async def _send_json(
    send: Send, status: int, content: object, *, close: bool = False, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """413 for a body that grows past its route's limit as it streams in (chunked: no ``Content-Length``).

    A ``Content-Length`` over the limit never gets here: admission (:mod:`mfumon.api.server.admission`) refuses it on
    the head.
    """

    def __init__(self, app: ASGIApp, limit_of: Callable[[str, str], int]) -> None:
        self.app = app
        self.limit_of = limit_of  # (method, path) -> most bytes its body may have

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.limit(scope)
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, counting_receive, send)
        except BodyTooLarge:
            await _send_json(send, 413, {"detail": f"request body exceeds {max_bytes} bytes"}, close=True)

    def limit(self, scope: Scope) -> int:
        """The most bytes the request's body may have."""
        return self.limit_of(scope.get("method", ""), scope.get("path", ""))


#: media types that are JSON; curl ``-d`` sends ``application/x-www-form-urlencoded`` unless told otherwise
_JSON_TYPE = re.compile(rb"^application/([\w.+-]+\+)?json\s*(;|$)", re.IGNORECASE)
_READ_AS_JSON = frozenset({b"", b"application/x-www-form-urlencoded"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class JsonContentType:
    """Every write under ``/v1/`` takes JSON: a body without ``Content-Type``, or with curl ``-d``'s default
    (``application/x-www-form-urlencoded``; no route takes a form), is read as JSON; a body of another declared type
    gets 415 naming the header to send. FastAPI otherwise refused both with "Input should be a valid dictionary or
    object to extract fields from", which names neither the header nor the fix.

    Only the ASGI scope's headers change: admission and the door (:mod:`mfumon.api.server.door`) decided on the raw
    request head before this runs.
    """

    def __init__(self, app: ASGIApp, prefix: str = "/v1/") -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS or not scope["path"].startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]  # copied only to be changed
        declared = [value for name, value in headers if name == b"content-type"]
        if declared and (declared[0] == b"application/json" or _JSON_TYPE.match(declared[0].strip())):
            await self.app(scope, receive, send)
            return
        media = declared[0].split(b";", 1)[0].strip().lower() if declared else b""
        if media in _READ_AS_JSON:
            headers = [(name, value) for name, value in headers if name != b"content-type"]
            headers.append((b"content-type", b"application/json"))
            await self.app({**scope, "headers": headers}, receive, send)
        elif not _has_body(headers):
            await self.app(scope, receive, send)
        else:
            got = declared[0].decode("latin-1")[:100]
            detail = f"the body must be JSON: send the header 'Content-Type: application/json' (got {got!r})"
            await _send_json(send, 415, {"detail": detail})


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False
