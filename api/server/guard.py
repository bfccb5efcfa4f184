"""Connection hygiene for ``mfumon serve``: the deadlines, the caps and the budget of untrusted connections.

uvicorn closes a keep-alive connection that stays idle after a response, but it never times out a connection that
has not yet sent a complete request head (a half-open socket, a slowloris trickle), never gives up on a client that
stops reading its response, and keeps accepting until the process runs out of file descriptors. The server's
protocol (:mod:`mfumon.api.server.protocol`) adds those three deadlines and a connection cap, kept here:

- the request head must be complete within ``header_timeout_s`` of the connection opening, or of the first byte of a
  later request (408 if part of it came, a plain close if nothing did); between requests a kept-alive connection may
  stay idle for uvicorn's ``timeout_keep_alive`` (``KEEPALIVE_TIMEOUT_SECONDS``), longer than any client's interval;
- a response the client does not read for ``write_timeout_s`` is abandoned;
- every request is stamped with when its bytes were read (:meth:`ConnectionGuard.arrival`,
  ``mfumon.api.server.overload.ARRIVED``), so ingest that waited too long behind others is refused at once rather
  than served late;
- a connection is *untrusted* until a request on it presented a valid token (with tokens off: until a request was
  admitted). At most ``max_untrusted`` are open at once: past that, a new connection evicts the untrusted one that
  has waited longest for a request head, so a storm of unauthenticated connections churns among its own and never
  closes an exporter's kept-alive connection;
- a connection whose request was refused on its head reads and drops the rest of the body for a few seconds
  (a lingering close, so the client reads the refusal instead of a reset); it still counts against both caps, and a
  new connection past either evicts such a connection before any other;
- past ``max_connections``, a new connection first evicts the connection that has waited longest for a request
  head (an untrusted one first; an idle or slow one, never one with a request in flight); if none waits, the new
  one gets 503.

What is decided on a request head (admission, the ingest gate, pushes taken in place) is the door's
(:mod:`mfumon.api.server.door`). The request *body* deadline (408) is an ASGI middleware
(:class:`mfumon.api.middleware.BodyTimeout`), so it works under any server. Counters of what was closed, and why,
are on ``/metrics``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable

from mfumon.api.server.admission import Admission
from mfumon.api.server.interface import Connection, InPlace
from mfumon.api.server.overload import IngestGate

CLOSE_REASONS = ("header_timeout", "write_timeout", "evicted", "refused", "not_admitted")


class ConnectionGuard:
    """The limits, the connections waiting for a request head (oldest first), and counts of connections closed."""

    def __init__(
        self,
        *,
        header_timeout_seconds: float,
        write_timeout_seconds: float,
        max_connections: int,
        max_untrusted: int | None = None,
        gate: IngestGate | None = None,
        admission: Callable[[], Admission | None] | None = None,
        on_refused: Callable[[str, str, str], None] | None = None,
        in_place: Callable[[], InPlace | None] | None = None,
    ) -> None:
        self.gate = gate
        self.in_place = in_place  # the app's taker of requests in place, once it has one (None before)
        self.admission = admission  # the app's admission, once it has started (None before)
        self.on_refused = on_refused  # (method, path, reason) of each request refused on admission
        if gate is not None:
            gate.door = True  # every ingest request is counted, or refused, as its head is parsed
        self.header_timeout_seconds = header_timeout_seconds
        self.write_timeout_seconds = write_timeout_seconds
        self.max_connections = max_connections
        self.max_untrusted = max_connections if max_untrusted is None else max_untrusted
        self.waiting: dict[Connection, None] = {}  # insertion order: the longest waiting first
        self.untrusted: dict[Connection, None] = {}  # no valid token seen on them yet; oldest first
        self.lingering: dict[Connection, None] = {}  # refused, reading what is left of the body to drop; evicted first
        self._turn_began: float | None = None
        self.open = 0
        self.ended = 0  # connections ended, for whatever reason: memory to hand back after a storm (mfumon.api.main)
        self._closed: Counter[str] = Counter()
        self._lock = threading.Lock()  # the counters are read by /metrics from another thread

    def arrival(self, loop: asyncio.AbstractEventLoop) -> float:
        """When the server learned of the bytes a callback now reads: when the first read of this turn of the event
        loop began. The loop runs every socket that select() found readable one after another, and a push is taken
        in the callback that reads it, so a push read late in a busy turn waited for all the pushes read before it;
        past the ingest queue bound it is refused at the door, as a request queued in the app is."""
        if self._turn_began is None:
            self._turn_began = time.monotonic()
            loop.call_soon(self._end_turn)  # runs after this turn's callbacks: before the next select()'s
        return self._turn_began

    def _end_turn(self) -> None:
        self._turn_began = None

    def count(self, reason: str) -> None:
        with self._lock:
            self._closed[reason] += 1

    def closed(self) -> dict[str, int]:
        with self._lock:
            return {reason: self._closed[reason] for reason in CLOSE_REASONS}

    def evict_one(self, newcomer: Connection, *, untrusted_only: bool = False) -> bool:
        """Close a connection lingering after a refusal, else the one that has waited longest for a request head, an
        untrusted one first; False when none waits (none untrusted, with ``untrusted_only``)."""
        for victim in self.lingering:  # refused: the rest of its body is read only as a courtesy
            if victim is not newcomer and (victim in self.untrusted or not untrusted_only):
                del self.lingering[victim]
                self.untrusted.pop(victim, None)
                victim.hang_up()
                self.count("evicted")
                return True
        candidates = [c for c in self.waiting if c is not newcomer]
        victims = [c for c in candidates if c in self.untrusted]
        if not untrusted_only:
            victims += [c for c in candidates if c not in self.untrusted]
        if not victims:
            return False
        victim = victims[0]
        del self.waiting[victim]
        self.untrusted.pop(victim, None)
        victim.hang_up()
        self.count("evicted")
        return True

    def admit(self, newcomer: Connection) -> bool:
        """Make room for a new (untrusted) connection by evicting one that waits; False if it must be refused.
        Without admission at the door (``MFUMON_IN_PLACE=0``) no token is seen here: no connection is told apart."""
        if self.admission is not None:
            self.untrusted[newcomer] = None
            if len(self.untrusted) > self.max_untrusted and not self.evict_one(newcomer, untrusted_only=True):
                return False
        return self.open <= self.max_connections or self.evict_one(newcomer)
