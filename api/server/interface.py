"""What the door asks of a connection, and of the app that takes a push in place: the interface between
:mod:`mfumon.api.server.protocol`, the one module that touches uvicorn's, h11's and asyncio's internals, and the rest
of ``mfumon serve``'s connection handling (:mod:`~mfumon.api.server.guard`, :mod:`~mfumon.api.server.door`).

Nothing here names uvicorn or h11: a request head reaches the door as its method, target, header pairs (names in
lower case) and HTTP version, all ``bytes``; what the door decides goes back as one call on the connection.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from mfumon.api.core.security import Principal

if TYPE_CHECKING:
    from mfumon.api.server.admission import Refusal
    from mfumon.api.server.guard import ConnectionGuard

Headers = Iterable[tuple[bytes, bytes]]
"""A request's header pairs, names in lower case (as h11 and ASGI give them)."""


class Connection(Protocol):
    """One client connection, as the guard and the door see it (:class:`mfumon.api.server.protocol.GuardedH11Protocol`).

    Per-request state the door keeps on it: ``reading`` (in the callback that reads the connection's bytes: where a
    push may be taken in place), ``arrived`` (when the server learned of those bytes), ``arriving`` (who a body still
    arriving is counted against) and ``handed_over`` (an error taking a push in place raised, for the ASGI cycle
    the server then starts)."""

    guard: ConnectionGuard
    reading: bool
    arrived: float
    arriving: tuple[str, ...] | None
    handed_over: Exception | None

    @property
    def root_path(self) -> str: ...

    @property
    def client(self) -> tuple[str, int] | None: ...

    def live_requests(self) -> int:
        """Requests the server has taken on this process and not finished (every connection's)."""
        ...

    def read_past_head(self) -> tuple[bytes, bool]:
        """What was read past the request head (its body, if whole), and whether the client closed its side."""
        ...

    def body_in_place(self, http_version: bytes, headers: Headers) -> bytes | None:
        """The whole body read with the head, when the request can be answered in place: answering it leaves the
        connection where the server itself would (HTTP/1.1, plain keep-alive framing, the client still there);
        else None."""
        ...

    def answer_in_place(self, body: bytes) -> None:
        """Answer 200 with the JSON ``body`` as the server would, and read on (the request is done)."""
        ...

    def answer_and_close(self, refusal: Refusal, head_only: bool) -> None:
        """Answer ``refusal`` and close: a body that may follow is never parsed or kept, but what the client still sends
        of it is read and dropped for a few seconds first (a lingering close, bounded in bytes and time), so a client
        still sending reads the answer rather than a reset. ``head_only``: a HEAD request."""
        ...

    def refuse_and_read_on(self, close: bool) -> None:
        """Answer the ingest gate's 503; the body that may follow is read and dropped, and the connection kept alive
        unless the request asked to ``close``."""
        ...

    def hang_up(self) -> None:
        """Close the connection now (evicted)."""
        ...


class InPlace(Protocol):
    """What takes a request in place (the app's fast door): the answer's JSON body (200), an error to hand to the
    app's ASGI path with the request (under :data:`mfumon.api.server.overload.HANDED_OVER`), or None to let the
    request through."""

    def take_in_place(
        self, method: str, path: str, headers: Headers, body: bytes, principal: Principal | None
    ) -> bytes | Exception | None: ...
