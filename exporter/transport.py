"""An httpx transport that sends a request once more when the kept-alive connection it went out on was closed.

A server closes an idle keep-alive connection after its timeout; a client that reuses the connection in the same
instant writes its request into a socket the server is closing and gets ``Connection reset by peer`` or ``Server
disconnected without sending a response``, though the server never saw the request. Every request the exporter,
the inference collector and the demo send is idempotent (a push carries its timestamp, a report its interval), so
such a failure is retried once, at once: the broken connection has left the pool, so the retry opens a fresh one
(these clients send one request at a time, so no other idle connection waits in the pool). A connection that
cannot be opened, or a timeout, is not this race and is raised as before.

Shared by the node and demo sides; the job reporter uses ``urllib``, which opens a connection per request and so
never reuses one.
"""

from __future__ import annotations

import logging

import httpx

__all__ = ["STALE_CONNECTION_ERRORS", "FreshConnectionRetry"]

logger = logging.getLogger(__name__)

#: failures of a request on a connection the server closed under it (reset, or closed before answering)
STALE_CONNECTION_ERRORS: tuple[type[httpx.TransportError], ...] = (
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


class FreshConnectionRetry(httpx.BaseTransport):
    """Wraps a transport (default: a plain :class:`httpx.HTTPTransport`); ``retried`` counts the second tries."""

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        self._transport = transport if transport is not None else httpx.HTTPTransport()
        self.retried = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return self._transport.handle_request(request)
        except STALE_CONNECTION_ERRORS as exc:
            self.retried += 1
            logger.debug("%s %s: %s; sending it again on a fresh connection", request.method, request.url, exc)
            return self._transport.handle_request(request)

    def close(self) -> None:
        self._transport.close()
