"""ASGI middleware: reject oversized bodies before anything parses them."""

from __future__ import annotations

import json
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
