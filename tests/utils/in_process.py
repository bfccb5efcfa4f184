"""An app served in this process by uvicorn with ``mfumon serve``'s protocol, on a socket of its own, in a thread:
for tests that look inside the server (its objects, the app's state) while real clients talk to it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

from mfumon.api.server import bind_socket, url_of
from mfumon.api.server.guard import ConnectionGuard
from mfumon.api.server.protocol import GuardedH11Protocol


@contextmanager
def serve_in_process(app: ASGIApp, guard: ConnectionGuard) -> Iterator[int]:
    """Serve ``app`` behind ``guard`` until the block ends; yields the port."""
    sock = bind_socket("127.0.0.1", 0)
    config = uvicorn.Config(app, http=GuardedH11Protocol, log_level="warning", access_log=False)
    config.connection_guard = guard  # type: ignore[attr-defined]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield int(url_of(sock).rsplit(":", 1)[1])  # the socket itself is served: no port picked in advance
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
