"""``mfumon serve``'s HTTP protocol: uvicorn's h11 protocol with the guard's deadlines and caps and the door.

The one module of the package that touches uvicorn's, h11's or asyncio's members beyond their public interfaces
(``tests/test_layout.py`` holds it to that): it subclasses uvicorn's ``H11Protocol`` and ``h11.Connection``, and
offers the rest of :mod:`mfumon.api.server` a connection through :class:`mfumon.api.server.interface.Connection`
("the request's head", "what was read past it", "answer and close", "refuse and read on", "answer in place and
read on"). What it relies on is listed in :data:`RELIED_ON`; :func:`in_place_gaps` checks it as ``mfumon serve``
starts, which serves every request through the ASGI stack when a member is missing (as with ``MFUMON_IN_PLACE=0``).

- The deadlines and caps (:class:`mfumon.api.server.guard.ConnectionGuard`): a request-head timer from the
  connection's opening or a later request's first byte, a write timer while the client does not read, eviction and
  refusal as a connection opens.
- The door (:mod:`mfumon.api.server.door`): h11's connection calls it on each request head it parses, in the
  callback that read the bytes; a request answered there never reaches uvicorn's request cycle. A push answered in
  place is written as h11 would write it, and the connection reads on with a fresh h11 state (what h11 reaches after
  any keep-alive exchange; building it costs a tenth of sending the answer through h11's events). Every answer
  written here has the reason phrase and the default headers (``date``, ``server``) uvicorn writes, and none has a
  body after a HEAD.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import http
import logging
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import h11
import uvicorn.config
import uvicorn.server
from uvicorn.protocols.http import h11_impl
from uvicorn.protocols.http.h11_impl import H11Protocol

from mfumon.api.server import door
from mfumon.api.server.admission import Refusal
from mfumon.api.server.guard import ConnectionGuard
from mfumon.api.server.interface import Headers
from mfumon.api.server.overload import ARRIVED, HANDED_OVER, IngestGate

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

#: Lingering close (as nginx's): after a refusal answered on the head, what the client still sends of the body is read
#: and dropped before the connection closes, so a client still sending reads the answer instead of a reset (closing a
#: socket with unread bytes sends a RST, which discards the answer the client has yet to read). Bounded: at most the
#: declared ``Content-Length``, and never more than the largest body any route accepts (the scheduler's 64 MiB, so any
#: body a client meant for this server fits; a chunked body counts against it too), within ``LINGER_SECONDS`` of the
#: answer and ``LINGER_SILENCE_SECONDS`` of the last bytes. Nothing is buffered: each read is counted and dropped.
LINGER_BYTES = 64 * 1024 * 1024
LINGER_SECONDS = 5.0
LINGER_SILENCE_SECONDS = 2.0


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


class _Overloaded:
    """The door's 503 as uvicorn writes the ingest gate's: its head built once for each list of default headers (h11
    validates headers on creation; uvicorn makes a new list, with a new date, every second), its body once."""

    def __init__(self, gate: IngestGate) -> None:
        self.headers = gate.headers
        self.cached: tuple[list[tuple[bytes, bytes]] | None, h11.Response | None] = (None, None)
        self.body = h11.Data(data=gate.body)

    def head(self, default_headers: list[tuple[bytes, bytes]], close: bool) -> h11.Response:
        """The default headers, the gate's, and ``connection: close`` when the request asked to close."""
        if close:
            headers = [*default_headers, *self.headers, _CLOSE]
            return h11.Response(status_code=503, headers=headers, reason=_reason(503))
        cached, head = self.cached
        if cached is not default_headers or head is None:
            head = h11.Response(status_code=503, headers=[*default_headers, *self.headers], reason=_reason(503))
            self.cached = (default_headers, head)
        return head


_overloaded: weakref.WeakKeyDictionary[IngestGate, _Overloaded] = weakref.WeakKeyDictionary()  # one per gate


def _overloaded_of(gate: IngestGate | None) -> _Overloaded | None:
    if gate is None:
        return None
    found = _overloaded.get(gate)
    if found is None:
        found = _overloaded[gate] = _Overloaded(gate)
    return found


def _let_through(request: h11.Request) -> bool:
    return False


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
        self.lingering = False  # refused and closed on our side: the rest of the body is read and dropped

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
            if self.our_state is h11.CLOSED:  # refused, or the client asked to close: nothing more to parse
                return h11.NEED_DATA if self.lingering else h11.PAUSED  # lingering: read on (and drop)
            # Otherwise go on: the refused request's body follows, and uvicorn drops it (our side is done).


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline, a write deadline, a connection cap and the door; to the
    rest of the package a :class:`mfumon.api.server.interface.Connection`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard: ConnectionGuard = self.config.connection_guard  # type: ignore[attr-defined]
        self._head_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self.reading = False  # in data_received: where a request may be taken in place
        self.arrived = 0.0  # when the server learned of the bytes it is reading (ConnectionGuard.arrival)
        self.handed_over: Exception | None = None  # for the ASGI cycle of the request just let through
        self.arriving: tuple[str, ...] | None = None  # who the body still arriving is counted against (the gate's)
        self._event_size = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        self._overloaded: _Overloaded | None = None
        self._request: h11.Request | None = None  # the head the door decides on, while it does
        self._linger_left = -1  # bytes still to read and drop after a refusal (lingering close); -1: not lingering
        self._linger_last = 0.0  # when bytes last came while lingering (the loop's clock)
        self._linger_end = 0.0  # when lingering ends at the latest
        self._linger_timer: asyncio.TimerHandle | None = None
        if self.guard.gate is not None or self.guard.admission is not None:
            self._overloaded = _overloaded_of(self.guard.gate)
            self.conn = _DoorConnection(self._event_size, self._at_head)

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
        if self._linger_left >= 0:  # after a refusal: count and drop, never parse or keep
            self._linger_left -= len(data)
            self._linger_last = self.loop.time()
            if self._linger_left <= 0:
                self._end_linger()
            return
        arrived, cycle = self.guard.arrival(self.loop), self.cycle
        self.arrived = arrived
        self.reading = True
        try:
            super().data_received(data)
        finally:
            self.reading = False
        if self.cycle is not cycle and self.cycle is not None:  # a request head was parsed: when its bytes came
            self.cycle.scope[ARRIVED] = arrived  # type: ignore[literal-required]
            if self.handed_over is not None:
                self.cycle.scope[HANDED_OVER] = self.handed_over  # type: ignore[literal-required]
        self.handed_over = None
        if self.arriving is not None and self.conn.their_state is not h11.SEND_BODY:
            door.body_came(self)
        if self.conn.their_state is not h11.IDLE:
            self._head_arrived()
        elif self._head_timer is None and self.conn.trailing_data[0] and not self.transport.is_closing():
            self._start_head_timer()  # the first bytes of a head after an idle wait: now it must come in time

    def _at_head(self, request: h11.Request) -> bool:
        """h11's hook on each request head: the door's decision (True: answered here)."""
        self._request = request
        try:
            return door.at_head(self, request.method, request.target, request.headers, request.http_version)
        finally:
            self._request = None

    # The connection as the door sees it (mfumon.api.server.interface.Connection)

    def live_requests(self) -> int:
        return len(self.tasks)

    def read_past_head(self) -> tuple[bytes, bool]:
        return self.conn.trailing_data  # type: ignore[no-any-return]

    def body_in_place(self, http_version: bytes, headers: Headers) -> bytes | None:
        if http_version != b"1.1":
            return None
        for name, value in headers:
            if name in _NOT_IN_PLACE or (name == b"connection" and b"close" in value.lower()):
                return None
        buffered, closed = self.conn.trailing_data  # a copy of what was read past the head: the body, if whole
        return None if closed else buffered  # type: ignore[no-any-return]

    def answer_in_place(self, body: bytes) -> None:
        """Write the answer, then read on with a fresh h11 state and do what on_response_complete does after a
        response."""
        assert isinstance(self.conn, _DoorConnection)
        self.transport.write(_ok_json(self.server_state.default_headers, body))
        self.conn.release()
        self.conn.successor = self.conn = _DoorConnection(self._event_size, self._at_head)
        self.server_state.total_requests += 1
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
        self._wait_for_head(timed=False)

    def answer_and_close(self, refusal: Refusal, head_only: bool) -> None:
        """The answer uvicorn writes for :class:`mfumon.api.server.admission.Admit`'s: the reason phrase, the
        server's default headers first, and no body after a HEAD."""
        headers = [*self.server_state.default_headers, *refusal.response_headers()]
        data = self.conn.send(h11.Response(status_code=refusal.status, headers=headers, reason=_reason(refusal.status)))
        data = data or b""
        if not head_only:
            data += self.conn.send(h11.Data(data=refusal.body())) or b""
        data += self.conn.send(_END) or b""
        self.transport.write(data)
        left = self._body_to_drop()
        self.conn.send(h11.ConnectionClosed())
        if left <= 0:
            self.transport.close()
            return
        self._linger(left)

    def _body_to_drop(self) -> int:
        """How much of the refused request's body to read and drop before closing (0: close now): what is still to
        come of it, within :data:`LINGER_BYTES` of it in all."""
        request, conn = self._request, self.conn
        if request is None or conn.their_state is not h11.SEND_BODY:
            return 0
        buffered, closed = conn.trailing_data
        if closed:
            return 0
        budget = LINGER_BYTES
        for name, value in request.headers:
            if name == b"expect":  # 100-continue: the client sends no body after a final answer
                return 0
            if name == b"content-length":  # h11 checked it is digits
                budget = min(budget, int(value))
        return budget - len(buffered)

    def _linger(self, left: int) -> None:
        """Lingering close: say nothing more will come (half-close, where the transport can), then read and drop
        up to ``left`` bytes, until the client closes, falls silent or the time is up; the connection still counts
        against the guard's caps, and is the first a newcomer evicts."""
        assert isinstance(self.conn, _DoorConnection)
        self.conn.lingering = True
        self.guard.waiting.pop(self, None)
        self.guard.lingering[self] = None
        if self.transport.can_write_eof():
            self.transport.write_eof()  # sent once the answer is written
        self._linger_left = left
        self._linger_last = now = self.loop.time()
        self._linger_end = now + LINGER_SECONDS
        self._linger_timer = self.loop.call_at(now + LINGER_SILENCE_SECONDS, self._on_linger_timer)

    def _on_linger_timer(self) -> None:
        self._linger_timer = None
        now = self.loop.time()
        due = min(self._linger_end, self._linger_last + LINGER_SILENCE_SECONDS)
        if now >= due:
            self._end_linger()
        else:
            self._linger_timer = self.loop.call_at(due, self._on_linger_timer)

    def _end_linger(self) -> None:
        self._linger_left = 0
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        self.guard.lingering.pop(self, None)
        self.transport.close()

    def refuse_and_read_on(self, close: bool) -> None:
        overloaded = self._overloaded
        assert overloaded is not None  # called only with a gate
        self.transport.write(
            (self.conn.send(overloaded.head(self.server_state.default_headers, close)) or b"")
            + (self.conn.send(overloaded.body) or b"")
            + (self.conn.send(_END) or b"")
        )
        if self.conn.our_state is h11.MUST_CLOSE:
            self.conn.send(h11.ConnectionClosed())
            self.transport.close()
        self.on_response_complete()  # keep-alive deadline, as after any response

    def hang_up(self) -> None:
        self.transport.close()

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
        door.body_came(self)
        self.guard.untrusted.pop(self, None)
        if self._linger_left >= 0:
            self._end_linger()
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
