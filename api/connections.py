"""Connection hygiene for ``mfumon serve``: no idle, slow or silent client holds a connection for long.

uvicorn closes a keep-alive connection that stays idle after a response, but it never times out a connection that
has not yet sent a complete request head (a half-open socket, a slowloris trickle), never gives up on a client that
stops reading its response, and keeps accepting until the process runs out of file descriptors. This protocol adds
those three deadlines and a connection cap to uvicorn's own h11 protocol:

- the request head must be complete within ``header_timeout_s`` of the connection opening, or of the first byte of a
  later request (408 if part of it came, a plain close if nothing did); between requests a kept-alive connection may
  stay idle for uvicorn's ``timeout_keep_alive`` (``KEEPALIVE_TIMEOUT_SECONDS``), longer than any client's interval;
- a response the client does not read for ``write_timeout_s`` is abandoned;
- every request is stamped with when its bytes were read (``mfumon.api.overload.ARRIVED``), so ingest that waited too
  long behind others is refused at once rather than served late;
- admission (:mod:`mfumon.api.admission`: the token and the declared body size) is decided at the door, in the callback
  that parsed the head: a refused request is answered 401, 403 or 413 there, its body is never read, it takes no
  in-flight slot, and its connection is closed;
- ingest past the in-flight limit (:class:`mfumon.api.overload.IngestGate`), or read past the queue bound after the
  server learned of its bytes (:meth:`ConnectionGuard.arrival`), is refused at the door: answered 503 in the
  callback that parsed its head, its body then read and dropped, the connection kept alive; so is a request whose
  body has yet to arrive once its token, team or (tokens off) client address holds its share of the slots with
  such bodies (:meth:`mfumon.api.overload.IngestGate.hold_arriving`): one client's stalled bodies cannot refuse
  another's pushes. Every answer written here has the reason phrase and the default headers (``date``,
  ``server``) uvicorn writes, and none has a body after a HEAD;
- a node push whose whole body came with its head is taken *in place* (:meth:`GuardedH11Protocol._take_in_place`):
  the app's fast door (:meth:`mfumon.api.fast_door.FastDoor.take_in_place`) takes it in the callback that parsed
  the head, the answer is written as h11 would write it, and the connection reads on with a fresh h11 state. No
  ASGI cycle, task or h11 response events: they were about a third of a push's CPU. Anything else, or an error
  taking it, goes through uvicorn and the app as before (the error handed over with the request);
- a connection is *untrusted* until a request on it presented a valid token (with tokens off: until a request was
  admitted). At most ``max_untrusted`` are open at once: past that, a new connection evicts the untrusted one that
  has waited longest for a request head, so a storm of unauthenticated connections churns among its own and never
  closes an exporter's kept-alive connection;
- past ``max_connections``, a new connection first evicts the connection that has waited longest for a request
  head (an untrusted one first; an idle or slow one, never one with a request in flight); if none waits, the new
  one gets 503.

With ``MFUMON_IN_PLACE=0``, or when :func:`in_place_gaps` finds a member of uvicorn, h11 or asyncio missing that
the door relies on (:data:`RELIED_ON`), the guard keeps its deadlines and caps but has no door: every request goes
through the app's ASGI stack, whose middleware give the same answers.

The request *body* deadline (408) is an ASGI middleware (:class:`mfumon.api.middleware.BodyTimeout`), so it works under
any server. Counters of what was closed, and why, are on ``/metrics``.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import http
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Protocol
from urllib.parse import unquote

import h11
import uvicorn.config
import uvicorn.server
from uvicorn.protocols.http import h11_impl
from uvicorn.protocols.http.h11_impl import H11Protocol

from mfumon.api.admission import Admission, Refusal
from mfumon.api.core.security import Principal
from mfumon.api.middleware import NODE_SAMPLES, endpoint_of
from mfumon.api.overload import ARRIVED, HANDED_OVER, IngestGate, holders_of

CLOSE_REASONS = ("header_timeout", "write_timeout", "evicted", "refused", "not_admitted")
DEFAULT_MAX_INCOMPLETE_EVENT_SIZE: int = getattr(h11_impl, "DEFAULT_MAX_INCOMPLETE_EVENT_SIZE", 16 * 1024)

logger = logging.getLogger(__name__)

#: What the door (the in-place path: admission, the ingest gate and pushes taken in place, all in the protocol's
#: callback) relies on in uvicorn, h11 and asyncio beyond their public interfaces: (owner, member). A member set in
#: the owner's ``__init__`` counts as there when the constructor assigns it. :func:`in_place_gaps` checks them all
#: as ``mfumon serve`` starts, which serves every request through the ASGI stack when one is missing.
RELIED_ON: tuple[tuple[type, str], ...] = (
    # uvicorn's h11 protocol: its connection, request cycle and shared state, and its keep-alive handling
    (H11Protocol, "config"),
    (H11Protocol, "conn"),
    (H11Protocol, "cycle"),
    (H11Protocol, "tasks"),
    (H11Protocol, "connections"),
    (H11Protocol, "loop"),
    (H11Protocol, "transport"),
    (H11Protocol, "client"),
    (H11Protocol, "root_path"),
    (H11Protocol, "server_state"),
    (H11Protocol, "timeout_keep_alive"),
    (H11Protocol, "timeout_keep_alive_task"),
    (H11Protocol, "timeout_keep_alive_handler"),
    (H11Protocol, "_unset_keepalive_if_required"),
    (H11Protocol, "handle_events"),  # which reads the request heads through ``conn.next_event``: the door's hook
    (H11Protocol, "on_response_complete"),
    (h11_impl.RequestResponseCycle, "scope"),
    (uvicorn.server.ServerState, "default_headers"),
    (uvicorn.server.ServerState, "total_requests"),
    (uvicorn.config.Config, "h11_max_incomplete_event_size"),
    # h11: what was read past the request head, and the states the door answers in
    (h11.Connection, "trailing_data"),
    (h11.Connection, "our_state"),
    (h11.Connection, "their_state"),
    (h11.Connection, "next_event"),
    # asyncio's socket transport: the bound method of itself that connection_lost breaks (a reference cycle)
    (asyncio.selector_events._SelectorSocketTransport, "_read_ready_cb"),  # type: ignore[attr-defined]
)


def _has(owner: type, name: str) -> bool:
    if hasattr(owner, name):
        return True
    code = getattr(owner.__init__, "__code__", None)  # type: ignore[misc]
    return code is not None and name in code.co_names


def in_place_gaps() -> list[str]:
    """The members of :data:`RELIED_ON` this process's uvicorn, h11 and asyncio lack (``Owner.member``), and the
    module constant the door sizes its h11 connections by; empty when the in-place path can run."""
    gaps = [f"{owner.__module__}.{owner.__qualname__}.{name}" for owner, name in RELIED_ON if not _has(owner, name)]
    if not hasattr(h11_impl, "DEFAULT_MAX_INCOMPLETE_EVENT_SIZE"):
        gaps.append(f"{h11_impl.__name__}.DEFAULT_MAX_INCOMPLETE_EVENT_SIZE")
    return gaps


def _reason(status: int) -> bytes:
    """The standard reason phrase, as uvicorn writes it."""
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _header_lines(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    return b"".join(name + b": " + value + b"\r\n" for name, value in headers)


def _raw_response(status: int, detail: str, extra: str = "") -> tuple[bytes, bytes]:
    """An answer written before any request was parsed (the connection then closes): its status line, and its own
    headers and body; the server's default headers (``date``, ``server``) go between them as it is written."""
    body = ('{"detail":"' + detail + '"}').encode()
    rest = f"content-type: application/json\r\nconnection: close\r\n{extra}content-length: {len(body)}\r\n\r\n"
    return b"HTTP/1.1 %d %s\r\n" % (status, _reason(status)), rest.encode() + body


_HEADER_TIMEOUT = _raw_response(408, "the request head did not arrive in time")
_REFUSED = _raw_response(503, "too many connections", "retry-after: 1\r\n")
_CLOSE = (b"connection", b"close")
_END = h11.EndOfMessage()


_head: tuple[list[tuple[bytes, bytes]] | None, bytes] = (None, b"")  # default headers, and the status line with them


def _ok_json(default_headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    """A 200 JSON answer as uvicorn's cycle and h11 write the fast door's: the server's default headers (``date``,
    ``server``; uvicorn builds a new list every second, so the lines are joined again only then), then
    ``content-length`` and ``content-type``."""
    global _head
    if _head[0] is not default_headers:
        lines = b"".join(name + b": " + value + b"\r\n" for name, value in default_headers)
        _head = (default_headers, b"HTTP/1.1 200 OK\r\n" + lines)
    return b"%scontent-length: %d\r\ncontent-type: application/json\r\n\r\n%s" % (_head[1], len(body), body)


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
        # The door's 503: its head built once for each list of default headers (h11 validates headers on creation;
        # uvicorn makes a new list, with a new date, every second), its body once.
        self._refusal_head: tuple[list[tuple[bytes, bytes]] | None, h11.Response | None] = (None, None)
        self.refusal_body = h11.Data(data=gate.body if gate is not None else b"")
        if gate is not None:
            gate.door = True  # every ingest request is counted, or refused, as its head is parsed
        self.header_timeout_seconds = header_timeout_seconds
        self.write_timeout_seconds = write_timeout_seconds
        self.max_connections = max_connections
        self.max_untrusted = max_connections if max_untrusted is None else max_untrusted
        self.waiting: dict[GuardedH11Protocol, None] = {}  # insertion order: the longest waiting first
        self.untrusted: dict[GuardedH11Protocol, None] = {}  # no valid token seen on them yet; oldest first
        self._turn_began: float | None = None
        self.open = 0
        self.ended = 0  # connections ended, for whatever reason: memory to hand back after a storm (mfumon.api.main)
        self._closed: Counter[str] = Counter()
        self._lock = threading.Lock()  # the counters are read by /metrics from another thread

    def refusal_head(self, default_headers: list[tuple[bytes, bytes]], close: bool) -> h11.Response:
        """The head of the door's 503, as uvicorn writes the ingest gate's: the default headers, the gate's, and
        ``connection: close`` when the request asked to close."""
        assert self.gate is not None
        if close:
            headers = [*default_headers, *self.gate.headers, _CLOSE]
            return h11.Response(status_code=503, headers=headers, reason=_reason(503))
        cached, head = self._refusal_head
        if cached is not default_headers or head is None:
            head = h11.Response(status_code=503, headers=[*default_headers, *self.gate.headers], reason=_reason(503))
            self._refusal_head = (default_headers, head)
        return head

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

    def evict_one(self, newcomer: GuardedH11Protocol, *, untrusted_only: bool = False) -> bool:
        """Close the connection that has waited longest for a request head, an untrusted one first; False when
        none waits (none untrusted, with ``untrusted_only``)."""
        candidates = [c for c in self.waiting if c is not newcomer]
        victims = [c for c in candidates if c in self.untrusted]
        if not untrusted_only:
            victims += [c for c in candidates if c not in self.untrusted]
        if not victims:
            return False
        victim = victims[0]
        del self.waiting[victim]
        self.untrusted.pop(victim, None)
        victim.transport.close()
        self.count("evicted")
        return True

    def admit(self, newcomer: GuardedH11Protocol) -> bool:
        """Make room for a new (untrusted) connection by evicting one that waits; False if it must be refused.
        Without admission at the door (``MFUMON_IN_PLACE=0``) no token is seen here: no connection is told apart."""
        if self.admission is not None:
            self.untrusted[newcomer] = None
            if len(self.untrusted) > self.max_untrusted and not self.evict_one(newcomer, untrusted_only=True):
                return False
        return self.open <= self.max_connections or self.evict_one(newcomer)


def _let_through(request: h11.Request) -> bool:
    return False


class InPlace(Protocol):
    """What takes a request in place (the app's fast door): the answer's JSON body (200), an error to hand to the
    app's ASGI path with the request (under :data:`HANDED_OVER`), or None to let the request through."""

    def take_in_place(
        self, method: str, path: str, headers: Iterable[tuple[bytes, bytes]], body: bytes, principal: Principal | None
    ) -> bytes | Exception | None: ...


#: Request headers that make h11's framing or keep-alive differ from a plain keep-alive POST: such a request is never
#: taken in place, so the raw answer and the fresh h11 state below are always what h11 itself would have reached.
_NOT_IN_PLACE = frozenset({b"expect", b"transfer-encoding", b"upgrade"})


class _DoorConnection(h11.Connection):
    """h11's server side with a hook on each request head: ``refuse`` answers it on the spot (True) or lets it
    through to uvicorn, which then runs the app (False)."""

    def __init__(self, max_incomplete_event_size: int, refuse: Callable[[h11.Request], bool]) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size)
        self._refuse = refuse
        self.successor: _DoorConnection | None = None  # set when a request was answered in place

    def release(self) -> None:
        """Drop the hook (a bound method of the protocol, which holds this connection): the cycle between them
        kept every ended connection's objects, about 3 KB, until a full collection, which an idle server rarely
        runs; a storm of 6,000 connections left about 20 MB behind each time."""
        self._refuse = _let_through

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        while True:
            event = super().next_event()
            if not isinstance(event, h11.Request) or not self._refuse(event):
                return event
            if self.successor is not None:  # answered in place: the protocol reads on with a fresh connection
                return self.successor.next_event()
            if self.our_state is h11.CLOSED:  # the client asked to close: nothing more to read
                return h11.PAUSED
            # Otherwise go on: the refused request's body follows, and uvicorn drops it (our side is done).


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline, a write deadline, a connection cap and the ingest door."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard: ConnectionGuard = self.config.connection_guard  # type: ignore[attr-defined]
        self._head_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._reading = False  # in data_received: where a request may be taken in place
        self._arrived = 0.0  # when the server learned of the bytes it is reading (ConnectionGuard.arrival)
        self._handed_over: Exception | None = None  # for the ASGI cycle of the request just let through
        self._arriving: tuple[str, ...] | None = None  # who the body still arriving is counted against (the gate's)
        self._event_size = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        if self.guard.gate is not None or self.guard.admission is not None:
            self.conn = _DoorConnection(self._event_size, self._refuse_at_door)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        guard = self.guard
        guard.open = len(self.connections)
        if not guard.admit(self):
            guard.untrusted.pop(self, None)
            guard.count("refused")
            transport.write(_REFUSED[0] + _header_lines(self.server_state.default_headers) + _REFUSED[1])
            transport.close()
            return
        self._wait_for_head()

    def data_received(self, data: bytes) -> None:
        arrived, cycle = self.guard.arrival(self.loop), self.cycle
        self._arrived = arrived
        self._reading = True
        try:
            super().data_received(data)
        finally:
            self._reading = False
        if self.cycle is not cycle and self.cycle is not None:  # a request head was parsed: when its bytes came
            self.cycle.scope[ARRIVED] = arrived  # type: ignore[literal-required]
            if self._handed_over is not None:
                self.cycle.scope[HANDED_OVER] = self._handed_over  # type: ignore[literal-required]
        self._handed_over = None
        if self._arriving is not None and self.conn.their_state is not h11.SEND_BODY:
            self._body_came()
        if self.conn.their_state is not h11.IDLE:
            self._head_arrived()
        elif self._head_timer is None and self.conn.trailing_data[0] and not self.transport.is_closing():
            self._start_head_timer()  # the first bytes of a head after an idle wait: now it must come in time

    def _refuse_at_door(self, request: h11.Request) -> bool:
        """Admit a request as its head arrives (token, declared body size), then count an ingest request, or answer
        it 503 if the in-flight limit is reached or it waited past the queue bound; True when it was answered here
        (refused, or taken in place)."""
        if self._arriving is not None:  # a new head: the body before it came whole
            self._body_came()
        try:
            path = self.root_path + unquote(request.target.partition(b"?")[0].decode("ascii"))
            method = request.method.decode("ascii")
        except UnicodeDecodeError:
            return False  # uvicorn answers it
        admission = self.guard.admission() if self.guard.admission is not None else None
        principal: Principal | None = None
        if admission is not None:
            authorization = content_length = None
            transfer_encoding = False
            for name, value in request.headers:
                if name == b"authorization":
                    authorization = value.decode("latin-1")
                elif name == b"content-length":
                    content_length = value.decode("latin-1")
                elif name == b"transfer-encoding":
                    transfer_encoding = True
            verdict = admission.check(method, path, authorization, content_length, transfer_encoding)
            if isinstance(verdict, Refusal):
                self._answer_and_close(verdict, request)
                if self.guard.on_refused is not None:
                    self.guard.on_refused(method, path, verdict.reason)
                return True
            if verdict is not None or not admission.verifier.required:
                self.guard.untrusted.pop(self, None)  # a valid token (or none configured): trusted from now on
            principal = verdict
        gate = self.guard.gate
        endpoint = endpoint_of(method, path)
        if gate is None or endpoint is None:
            return False
        queued = time.monotonic() - self._arrived if self._reading else 0.0
        if queued <= gate.max_queue_seconds and gate.admit(len(self.tasks)):
            # admitted (the app's Admit refuses everything until it has started); only a node push is taken in place
            if (
                admission is not None
                and endpoint == NODE_SAMPLES
                and self._take_in_place(request, method, path, principal)
            ):
                return True
            if not self._body_to_come(request):
                return False
            holders = holders_of(principal, self.client)
            if gate.hold_arriving(holders):  # within its holders' share of the slots for bodies still arriving
                self._arriving = holders
                return False
            gate.done()  # refused below: its slot ends
        head = self.guard.refusal_head(self.server_state.default_headers, _CLOSE in request.headers)
        self.transport.write(
            (self.conn.send(head) or b"")
            + (self.conn.send(self.guard.refusal_body) or b"")
            + (self.conn.send(_END) or b"")
        )
        gate.refused(endpoint)
        if self.conn.our_state is h11.MUST_CLOSE:
            self.conn.send(h11.ConnectionClosed())
            self.transport.close()
        self.on_response_complete()  # keep-alive deadline, as after any response
        return True

    def _body_to_come(self, request: h11.Request) -> bool:
        """Whether some of the request's body has yet to arrive (a chunked body: always, it is not parsed here)."""
        for name, value in request.headers:
            if name == b"content-length":
                return len(self.conn.trailing_data[0]) < int(value)  # h11 checked it is digits
            if name == b"transfer-encoding":
                return True
        return False

    def _body_came(self) -> None:
        """The body counted as still arriving came (or its request ended): its holders' count goes down."""
        if self._arriving is not None and self.guard.gate is not None:
            self.guard.gate.arrived(self._arriving)
        self._arriving = None

    def _take_in_place(self, request: h11.Request, method: str, path: str, principal: Principal | None) -> bool:
        """Have the app take an admitted ingest request now, if its whole body is already here and nothing after it:
        answer 200, its slot ended, and read on with a fresh h11 state (what h11 reaches after any keep-alive
        exchange; building it costs a tenth of sending the answer through h11's events). True when answered."""
        door = self.guard.in_place() if self.guard.in_place is not None else None
        if door is None or not self._reading or request.http_version != b"1.1":
            return False
        for name, value in request.headers:
            if name in _NOT_IN_PLACE or (name == b"connection" and b"close" in value.lower()):
                return False
        buffered, closed = self.conn.trailing_data  # a copy of what was read past the head: the body, if whole
        if closed:
            return False
        answer = door.take_in_place(method, path, request.headers, buffered, principal)
        if answer is None or isinstance(answer, Exception):
            self._handed_over = answer  # the cycle uvicorn now starts answers it, through the app's handler
            return False
        assert isinstance(self.conn, _DoorConnection)
        self.transport.write(_ok_json(self.server_state.default_headers, answer))
        if self.guard.gate is not None:
            self.guard.gate.done()
        self.conn.release()
        self.conn.successor = self.conn = _DoorConnection(self._event_size, self._refuse_at_door)
        self.server_state.total_requests += 1  # then what on_response_complete does after a response
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
        self._wait_for_head(timed=False)
        return True

    def _answer_and_close(self, refusal: Refusal, request: h11.Request) -> None:
        """Answer a request refused on admission and close: its body, if any follows, is never read. The answer is
        the one uvicorn writes for :class:`mfumon.api.admission.Admit`'s: the reason phrase, the server's default
        headers first, and no body after a HEAD."""
        headers = [*self.server_state.default_headers, *refusal.response_headers()]
        data = self.conn.send(h11.Response(status_code=refusal.status, headers=headers, reason=_reason(refusal.status)))
        data = data or b""
        if request.method != b"HEAD":
            data += self.conn.send(h11.Data(data=refusal.body())) or b""
        data += self.conn.send(_END) or b""
        self.transport.write(data)
        self.conn.send(h11.ConnectionClosed())
        self.transport.close()
        self.guard.count("not_admitted")

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE:  # idle: uvicorn's keep-alive timeout closes it, not the head deadline
            self._wait_for_head(timed=False)
        else:  # a pipelined request was already parsed
            self._head_arrived()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        self._body_came()
        self.guard.untrusted.pop(self, None)
        if isinstance(self.conn, _DoorConnection):
            self.conn.release()  # no cycle left: the protocol goes at once, not at the next full collection
        if getattr(self.transport, "_read_ready_cb", None) is not None:
            # asyncio's socket transport keeps a bound method of itself (CPython 3.11: ``_read_ready_cb``), a cycle
            # that outlives the connection until a full collection; the reader is already removed from the loop.
            self.transport._read_ready_cb = None  # type: ignore[attr-defined]
        self._cancel_write_timer()
        super().connection_lost(exc)
        self.guard.open = len(self.connections)
        self.guard.ended += 1

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.guard.write_timeout_seconds, self._on_write_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_write_timer()

    def _wait_for_head(self, *, timed: bool = True) -> None:
        """Wait for a request head (first in line for eviction); ``timed``: within the head deadline from now."""
        self.guard.waiting.pop(self, None)
        self.guard.waiting[self] = None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if timed:
            self._start_head_timer()

    def _start_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.guard.header_timeout_seconds, self._on_head_timeout)

    def _head_arrived(self) -> None:
        self.guard.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _on_head_timeout(self) -> None:
        self._head_timer = None
        self.guard.waiting.pop(self, None)
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.trailing_data[0]:  # part of a request head came: tell the client why
            self.transport.write(
                _HEADER_TIMEOUT[0] + _header_lines(self.server_state.default_headers) + _HEADER_TIMEOUT[1]
            )
        self.transport.close()
        self.guard.count("header_timeout")

    def _on_write_timeout(self) -> None:
        self._write_timer = None
        if not self.transport.is_closing():
            self.transport.abort()
            self.guard.count("write_timeout")

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
