"""``mfumon serve``: the server around the app, and the door in its HTTP protocol.

- :mod:`~mfumon.api.server.run`: bind the socket, tune the process, run uvicorn (its names are this package's:
  ``from mfumon.api.server import run_app``);
- :mod:`~mfumon.api.server.protocol`: uvicorn's h11 protocol with the guard and the door: the ONE module that touches
  uvicorn's, h11's or asyncio's internals (``RELIED_ON``, ``in_place_gaps``; ``tests/test_layout.py`` holds it to that);
- :mod:`~mfumon.api.server.interface`: what the rest asks of a connection (and of the app's taker of pushes);
- :mod:`~mfumon.api.server.guard`: connection hygiene: deadlines, caps, the budget of untrusted connections;
- :mod:`~mfumon.api.server.door`: what is decided on a request head (admission, the ingest gate, pushes in place);
- :mod:`~mfumon.api.server.fast_door`: the app's taker of node pushes, ahead of its middleware and in place;
- :mod:`~mfumon.api.server.admission`, :mod:`~mfumon.api.server.overload`: the head-only checks and the ingest gate,
  applied by the door and, under any other server, by the app's outermost middleware.
"""

from mfumon.api.server.run import (
    GC_THRESHOLDS,
    MALLOC_ARENAS,
    SWITCH_INTERVAL_S,
    bind_socket,
    connection_guard,
    in_place,
    quiet_gc,
    raise_fd_limit,
    run_app,
    short_gil_turns,
    url_of,
)

__all__ = [
    "GC_THRESHOLDS",
    "MALLOC_ARENAS",
    "SWITCH_INTERVAL_S",
    "bind_socket",
    "connection_guard",
    "in_place",
    "quiet_gc",
    "raise_fd_limit",
    "run_app",
    "short_gil_turns",
    "url_of",
]
