"""The door of ``mfumon serve``: what is decided on a request head, in the callback that parsed it.

The server's protocol (:mod:`mfumon.api.server.protocol`) hands every request head here (:func:`at_head`) as soon as
it is parsed, before uvicorn starts a request cycle; what is decided goes back through the connection's interface
(:class:`mfumon.api.server.interface.Connection`), so nothing here knows uvicorn or h11:

- admission (:mod:`mfumon.api.server.admission`: the token and the declared body size): a refused request is answered
  401, 403, 413 (or 400) at once, its body is never read, it takes no in-flight slot, and its connection is closed;
- ingest past the in-flight limit (:class:`mfumon.api.server.overload.IngestGate`), or read past the queue bound
  after the server learned of its bytes (:meth:`mfumon.api.server.guard.ConnectionGuard.arrival`), is answered 503,
  its body then read and dropped, the connection kept alive; so is a request whose body has yet to arrive once its
  token, team or (tokens off) client address holds its share of the slots with such bodies
  (:meth:`mfumon.api.server.overload.IngestGate.hold_arriving`): one client's stalled bodies cannot refuse another's
  pushes;
- a node push whose whole body came with its head is taken *in place*: the app's fast door
  (:meth:`mfumon.api.server.fast_door.FastDoor.take_in_place`) takes it in the callback that parsed the head, and the
  connection answers it and reads on. No ASGI cycle, task or h11 response events: they were about a third of a
  push's CPU. Anything else, or an error taking it, goes through uvicorn and the app as before (the error handed
  over with the request).

With ``MFUMON_IN_PLACE=0``, or when :func:`mfumon.api.server.protocol.in_place_gaps` finds a member of uvicorn, h11 or
asyncio missing that the door relies on, there is no door: every request goes through the app's ASGI stack, whose
middleware give the same answers.
"""

from __future__ import annotations

import time
from urllib.parse import unquote

from mfumon.api.core.security import Principal
from mfumon.api.route_table import NODE_SAMPLES, endpoint_of
from mfumon.api.server.admission import Refusal
from mfumon.api.server.interface import Connection, Headers
from mfumon.api.server.overload import holders_of

_CLOSE = (b"connection", b"close")


def at_head(conn: Connection, method_bytes: bytes, target: bytes, headers: Headers, http_version: bytes) -> bool:
    """Admit a request as its head arrives (token, declared body size), then count an ingest request, or answer it
    503 if the in-flight limit is reached or it waited past the queue bound; True when it was answered here
    (refused, or taken in place), False to let it through to the server and the app."""
    if conn.arriving is not None:  # a new head: the body before it came whole
        body_came(conn)
    try:
        path = conn.root_path + unquote(target.partition(b"?")[0].decode("ascii"))
        method = method_bytes.decode("ascii")
    except UnicodeDecodeError:
        return False  # uvicorn answers it
    guard = conn.guard
    admission = guard.admission() if guard.admission is not None else None
    principal: Principal | None = None
    if admission is not None:
        authorization = content_length = None
        transfer_encoding = False
        for name, value in headers:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-length":
                content_length = value.decode("latin-1")
            elif name == b"transfer-encoding":
                transfer_encoding = True
        verdict = admission.check(method, path, authorization, content_length, transfer_encoding)
        if isinstance(verdict, Refusal):
            conn.answer_and_close(verdict, method_bytes == b"HEAD")
            guard.count("not_admitted")
            if guard.on_refused is not None:
                guard.on_refused(method, path, verdict.reason)
            return True
        if verdict is not None or not admission.verifier.required:
            guard.untrusted.pop(conn, None)  # a valid token (or none configured): trusted from now on
        principal = verdict
    gate = guard.gate
    endpoint = endpoint_of(method, path)
    if gate is None or endpoint is None:
        return False
    queued = time.monotonic() - conn.arrived if conn.reading else 0.0
    if queued <= gate.max_queue_seconds and gate.admit(conn.live_requests()):
        # admitted (the app's Admit refuses everything until it has started); only a node push is taken in place
        if (
            admission is not None
            and endpoint == NODE_SAMPLES
            and _take_in_place(conn, method, path, headers, http_version, principal)
        ):
            return True
        if not _body_to_come(conn, headers):
            return False
        holders = holders_of(principal, conn.client)
        if gate.hold_arriving(holders):  # within its holders' share of the slots for bodies still arriving
            conn.arriving = holders
            return False
        gate.done()  # refused below: its slot ends
    conn.refuse_and_read_on(_CLOSE in headers)
    gate.refused(endpoint)
    return True


def body_came(conn: Connection) -> None:
    """The body counted as still arriving came (or its request ended): its holders' count goes down."""
    gate = conn.guard.gate
    if conn.arriving is not None and gate is not None:
        gate.arrived(conn.arriving)
    conn.arriving = None


def _body_to_come(conn: Connection, headers: Headers) -> bool:
    """Whether some of the request's body has yet to arrive (a chunked body: always, it is not parsed here)."""
    for name, value in headers:
        if name == b"content-length":
            return len(conn.read_past_head()[0]) < int(value)  # the server checked it is digits
        if name == b"transfer-encoding":
            return True
    return False


def _take_in_place(
    conn: Connection, method: str, path: str, headers: Headers, http_version: bytes, principal: Principal | None
) -> bool:
    """Have the app take an admitted ingest request now, if its whole body is already here and nothing after it:
    answered 200 and its slot ended. True when answered."""
    guard = conn.guard
    door = guard.in_place() if guard.in_place is not None else None
    if door is None or not conn.reading:
        return False
    body = conn.body_in_place(http_version, headers)
    if body is None:
        return False
    answer = door.take_in_place(method, path, headers, body, principal)
    if answer is None or isinstance(answer, Exception):
        conn.handed_over = answer  # the cycle the server now starts answers it, through the app's handler
        return False
    conn.answer_in_place(answer)
    if guard.gate is not None:
        guard.gate.done()
    return True
