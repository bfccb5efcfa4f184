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
)


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

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(scope, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, counting_receive, send)
        except _TooLarge:
            await self._reject(scope, send)

    async def _reject(self, scope: Scope, send: Send) -> None:
        body = json.dumps({"detail": f"request body exceeds {self.max_bytes} bytes"}).encode()
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
