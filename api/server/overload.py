"""Fast refusal under overload: ingest that would wait answers 503 with ``Retry-After`` at once instead.

A server pushed past its capacity that keeps queueing makes every request late: exporters time out, retry, and
the queue only grows (at 2x capacity, p99 reached 18 s). Refusing the excess at once keeps the accepted requests
fast, and the clients, which spool and honour ``Retry-After``, come back later with jitter. Two signs of excess:

- more than ``limit`` ingest requests taken and not yet answered. Under ``mfumon serve`` they are counted at the
  door (:mod:`mfumon.api.server.door`): as soon as a request head is parsed, in the same callback
  that read its bytes, so one past the limit is answered there and then, never queued behind the others on the
  event loop, and costs no task, no ASGI call and no body parsing. Under another server this middleware counts
  them when it runs.
- a request taken that then waited longer than ``max_queue_s`` before the app got to it (the loop is saturated,
  or a flush, a scrape or a collector pass held it). The server stamps each request with when it learned of its
  bytes (``ARRIVED``: when the event loop's turn that reads them began its reads); past the bound the request is
  refused before its body is validated. A node push taken in place (in the callback that read it, under ``mfumon
  serve``) never waits after that; it is refused at the door if the pushes read before it in the same turn took
  longer than the bound (:meth:`mfumon.api.server.guard.ConnectionGuard.arrival`).

Shutting the door for a while after such a request, or while the event loop ran late turn after turn, was tried
side by side (``bench/results/cpu-2026-12-01f/``): not clearly better at 2x capacity within this machine's noise,
and some windows at 80% of capacity at 100,000 GPUs refused 1-3% of pushes with them. Not kept: the count at the
door and the queue bound are the whole rule.

The wait for a body is no queueing time: the queue bound is checked once the app got to a request, before any of
its body is awaited (:meth:`IngestGate.reached`), so a body that trickles in within the body deadline
(``BODY_TIMEOUT_SECONDS``) is never refused as overload. A request whose body is still arriving holds its slot all
the same (its body will be read and parsed), but at most a share of the slots (:data:`ARRIVING_SHARE`) may be held by
one token's (one team's; with tokens off, one address's) bodies still arriving (:meth:`IngestGate.hold_arriving`,
decided at the door under ``mfumon serve``): one client's stalled bodies cannot refuse another's pushes.

Only ingest (``PUT``/``POST`` under ``/v1/``) counts and is refused; reads, ``/metrics`` and health checks always
pass. The node push's fast door (:mod:`mfumon.api.server.fast_door`) takes and ends its pushes through the same gate
(:meth:`IngestGate.refuses`, :meth:`IngestGate.enter`, :meth:`IngestGate.done`), leaving a refusal to this
middleware. The count needs no lock: the door and this middleware both run on the event loop.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from mfumon.api.core.security import Principal
from mfumon.api.route_table import endpoint_of

ARRIVED = "mfumon.arrived"  # scope key: time.monotonic() when the server learned of the request's bytes
HANDED_OVER = "mfumon.push_error"  # scope key: the error taking a push in place raised, for the app to answer
ARRIVING_SHARE = 4
"""One token, one team, or (tokens off) one client address may hold at most ``1/ARRIVING_SHARE`` of the in-flight
slots with requests whose bodies are still arriving (at least one)."""


class IngestGate:
    """Ingest requests taken and not yet answered, the limit on them, and the refusal: shared by the door and
    :class:`IngestLimit`."""

    def __init__(
        self,
        *,
        limit: int,
        retry_after_seconds: int,
        max_queue_seconds: float,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.limit = limit
        self.max_queue_seconds = max_queue_seconds
        self.on_refused = on_refused  # called with the endpoint of each refusal (the ingest counter)
        self.pending = 0
        self.arriving_limit = max(1, limit // ARRIVING_SHARE)  # bodies still arriving, per holder
        self.arriving: Counter[str] = Counter()  # holder (token, team or address) -> its bodies still arriving
        self.door = False  # True when the server counts requests as it parses them (mfumon serve)
        self.retry_after = str(retry_after_seconds).encode()
        self.body = json.dumps(
            {
                "detail": f"overloaded: more than {limit} ingest requests in flight or queued over "
                f"{max_queue_seconds:g} s; retry after {retry_after_seconds} s"
            }
        ).encode()
        self.headers = [  # of the 503, whoever writes it: this middleware or the door
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self.body)).encode()),
            (b"retry-after", self.retry_after),
        ]

    def admit(self, live_requests: int | None = None) -> bool:
        """Take one more, or False past the limit. ``live_requests`` (every request the server has not finished,
        when it knows them) bounds the count, so a request that ended without its decrement cannot wedge it."""
        if live_requests is not None and self.pending > live_requests:
            self.pending = live_requests
        if self.pending >= self.limit:
            return False
        self.pending += 1
        return True

    def refuses(self, scope: Scope) -> bool:
        """Whether an ingest request must be refused: past the limit (unless the door counted it already) or
        queued past ``max_queue_seconds``. Changes nothing, so a caller may ask and then leave it to another."""
        if not self.door and self.pending >= self.limit:
            return True
        arrived = scope.get(ARRIVED)
        return arrived is not None and time.monotonic() - arrived > self.max_queue_seconds

    def reached(self, scope: Scope) -> None:
        """The app got to the request: its queueing ends here, and the wait for its body that may follow is none
        (a later :meth:`refuses` checks only the in-flight limit)."""
        scope.pop(ARRIVED, None)

    def hold_arriving(self, holders: Iterable[str]) -> bool:
        """Count one more body still arriving for each of ``holders`` (:func:`holders_of`), or False (nothing
        counted) when one of them holds its share already; :meth:`arrived` once the body came or the request ended."""
        holders = tuple(holders)
        arriving = self.arriving
        if any(arriving[holder] >= self.arriving_limit for holder in holders):
            return False
        for holder in holders:
            arriving[holder] += 1
        return True

    def arrived(self, holders: Iterable[str]) -> None:
        arriving = self.arriving
        for holder in holders:
            if arriving[holder] <= 1:
                arriving.pop(holder, None)
            else:
                arriving[holder] -= 1

    def enter(self) -> None:
        """Count an ingest request taken (the door counted it already); :meth:`done` once it is answered."""
        if not self.door:
            self.pending += 1

    def leave(self) -> None:
        """Undo :meth:`enter` for a request handed on after all (to the stack, which counts it again)."""
        if not self.door:
            self.pending = max(0, self.pending - 1)

    def done(self) -> None:
        self.pending = max(0, self.pending - 1)

    async def refuse(self, send: Send, endpoint: str) -> None:
        """Answer 503 + ``Retry-After`` and count the refusal."""
        self.refused(endpoint)
        await send({"type": "http.response.start", "status": 503, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})

    def refused(self, endpoint: str) -> None:
        if self.on_refused is not None:
            self.on_refused(endpoint)


def holders_of(principal: Principal | None, client: tuple[str, int] | None) -> tuple[str, ...]:
    """Who a body still arriving is counted against: its token and each of the token's teams; with no token (tokens
    off), the client's address."""
    if principal is None:
        return (f"address {client[0] if client else '?'}",)
    teams = principal.teams or ()
    return (f"token {principal.name}", *(f"team {team}" for team in sorted(teams)))


class IngestLimit:
    """503 + ``Retry-After`` for ingest beyond ``MAX_INGEST_IN_FLIGHT`` (unless the door already counted it) or
    queued longer than ``MAX_INGEST_QUEUE_SECONDS``. The decision and its effects are the gate's, which
    :class:`mfumon.api.server.fast_door.FastDoor` calls too."""

    def __init__(self, app: ASGIApp, *, gate: IngestGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = endpoint_of(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        gate = self.gate
        if gate.refuses(scope):
            if gate.door:
                gate.done()  # the door counted it: its refusal ends it
            await gate.refuse(send, endpoint)
            return
        gate.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            gate.done()
