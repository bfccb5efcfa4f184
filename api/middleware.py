"""ASGI middleware: reject oversized bodies before anything parses them; audit every write by token name."""

from __future__ import annotations

import json
import logging
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_ENDPOINTS = (
    ("POST", re.compile(r"^/v1/jobs/[^/]+/reports$"), "job_reports"),
    ("POST", re.compile(r"^/v1/jobs/[^/]+/end$"), "job_end"),
    ("POST", re.compile(r"^/v1/jobs/[^/]+/events$"), "job_events"),
    ("PUT", re.compile(r"^/v1/jobs/[^/]+$"), "job_update"),
    ("POST", re.compile(r"^/v1/nodes/[^/]+/samples$"), "node_samples"),
    ("PUT", re.compile(r"^/v1/scheduler/[^/]+$"), "scheduler_sync"),
)

#: A scheduler sync carries a whole queue (tens of thousands of jobs): it gets its own, larger body limit.
SCHEDULER_SYNC_PATH = re.compile(r"^/v1/scheduler/[^/]+$")


def endpoint_of(method: str, path: str) -> str | None:
    """The ingest endpoint a request targets, for the ``endpoint`` label of the ingest counter."""
    for m, pattern, name in _ENDPOINTS:
        if method == m and pattern.match(path):
            return name
    return None


audit_logger = logging.getLogger("api.audit")

_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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
        if scope["type"] != "http" or scope["method"] in _READ_METHODS:
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
            principal = (scope.get("state") or {}).get("principal")
            ctx = getattr(scope["app"].state, "ctx", None) if "app" in scope else None
            if principal is not None and ctx is not None:
                outcome = "accepted" if status < 400 else "rejected" if status < 500 else "failed"
                ctx.self_metrics.count_token_write(principal.name, endpoint_label(scope), outcome)
                if ctx.settings.AUDIT_LOG:
                    audit_logger.info("%s %s by token %s: %d", scope["method"], scope["path"], principal.name, status)


class _TooLarge(Exception):
    pass


class BodySizeLimit:
    """413 for bodies over ``max_bytes``, by Content-Length or by counting a chunked stream."""

    def __init__(self, app: ASGIApp, max_bytes: int, overrides: tuple[tuple[re.Pattern[str], int], ...] = ()) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = overrides  # (path pattern, limit) for routes whose bodies are larger by design

    def _limit(self, path: str) -> int:
        for pattern, limit in self.overrides:
            if pattern.match(path):
                return limit
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self._limit(scope.get("path", ""))
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            await self._reject(send, max_bytes)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, counting_receive, send)
        except _TooLarge:
            await self._reject(send, max_bytes)

    async def _reject(self, send: Send, max_bytes: int) -> None:
        body = json.dumps({"detail": f"request body exceeds {max_bytes} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
