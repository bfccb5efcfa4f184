"""Fast refusal under overload: ingest that would wait answers 503 with ``Retry-After`` at once instead.

A server pushed past its capacity that keeps queueing makes every request late: exporters time out, retry, and
the queue only grows (at 2x capacity, p99 reached 18 s). Refusing the excess at once keeps the accepted requests
fast, and the clients, which spool and honour ``Retry-After``, come back later with jitter. Two signs of excess:

- more than ``limit`` ingest requests inside the app at once (handlers that wait: the database, a lock);
- a request that already waited longer than ``max_queue_s`` before the app got to it. On one event loop most
  handlers never wait, so the queue forms in front of the app instead: requests parsed and not yet run, bytes
  not yet read. The server stamps each request when it reads its bytes (``ARRIVED``, set by
  :class:`api.connections.GuardedH11Protocol`); past the bound the request is refused before its body is
  validated, for a fraction of the cost of taking it, so the refusals drain the queue.

Only ingest (``PUT``/``POST`` under ``/v1/``) counts and is refused; reads, ``/metrics`` and health checks always
pass. The count is exact without a lock: every request enters and leaves this middleware on the event loop.
"""

from __future__ import annotations

import json
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from api.middleware import endpoint_of

ARRIVED = "mfumon.arrived"  # scope key: time.monotonic() when the server read the request's bytes


class IngestLimit:
    """503 + ``Retry-After`` for ingest beyond ``limit`` in flight (``MAX_INGEST_IN_FLIGHT``) or queued longer than
    ``max_queue_s`` (``MAX_INGEST_QUEUE_SECONDS``)."""

    def __init__(self, app: ASGIApp, *, limit: int, retry_after_s: int, max_queue_s: float) -> None:
        self.app = app
        self.limit = limit
        self.max_queue_s = max_queue_s
        self.in_flight = 0
        self._retry_after = str(retry_after_s).encode()
        self._body = json.dumps(
            {
                "detail": f"overloaded: more than {limit} ingest requests in flight or queued over {max_queue_s:g} s; "
                f"retry after {retry_after_s} s"
            }
        ).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = endpoint_of(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        arrived = scope.get(ARRIVED)
        if self.in_flight >= self.limit or (arrived is not None and time.monotonic() - arrived > self.max_queue_s):
            await self._refuse(scope, send, endpoint)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _refuse(self, scope: Scope, send: Send, endpoint: str) -> None:
        ctx = getattr(scope["app"].state, "ctx", None) if "app" in scope else None
        if ctx is not None:
            ctx.self_metrics.count_ingest(endpoint, "overloaded")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self._body)).encode()),
            (b"retry-after", self._retry_after),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": self._body})
