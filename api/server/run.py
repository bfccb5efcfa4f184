"""Serving the aggregator: bind the listening socket ourselves, say where we listen, then run uvicorn on it.

Binding before uvicorn starts gives a clear error and a non-zero exit for a busy port, and lets ``--port 0`` work:
the kernel picks a free port and the ``listening on`` line says which, so nothing has to guess a free port first.
"""

from __future__ import annotations

import gc
import logging
import os
import resource
import socket
import sys
from typing import TYPE_CHECKING

from starlette.types import ASGIApp

if TYPE_CHECKING:
    from mfumon.api.server.guard import ConnectionGuard

from mfumon.api.core.config import Settings
from mfumon.api.core.logs import RepeatLimit, limit_repeats
from mfumon.api.core.memory import limit_malloc_arenas
from mfumon.api.errors import BindError
from mfumon.cli import LISTENING_PREFIX


def bind_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: the kernel picks one), with SO_REUSEADDR like uvicorn's.

    Made with ``IPPROTO_TCP`` spelled out (``socket.create_server`` leaves it 0): asyncio turns Nagle's algorithm
    off (``TCP_NODELAY``) only on connections whose socket says TCP, and with it on, every response uvicorn writes
    as head then body waited ~40 ms for the client's delayed ACK (44 ms a request instead of 1 ms on loopback).
    """
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise BindError(exc.errno, f"cannot listen on {host}:{port}: {reason}") from exc
    return sock


def url_of(sock: socket.socket) -> str:
    """The ``http://host:port`` a bound socket answers on (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if sock.family == socket.AF_INET6 else f"http://{host}:{port}"


def raise_fd_limit(reserve: int = 256) -> int:
    """Raise the soft file-descriptor limit to the hard one; returns how many connections fit beside ``reserve``
    descriptors kept for the database, logs and files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return max(16, (soft if soft != resource.RLIM_INFINITY else 1 << 20) - reserve)


MALLOC_ARENAS = 2  # see mfumon.api.core.memory
GC_THRESHOLDS = (50_000, 20, 10)  # young generation 70x the default: each pass promotes less to the old one


def quiet_gc() -> None:
    """Fewer and shorter pauses of Python's cycle collector, for a server whose state is many long-lived objects.

    The aggregator holds hundreds of objects per node, replaced on every push and freed by reference counting.
    Left at its defaults the collector walked them all the time: at 10,000 GPUs and about 1,000 pushes/s it took
    about 5% of the CPU (1,300 young, 110 middle and 8 full passes in 15 s, pauses up to 106 ms). Freezing what
    exists once imports are done takes the modules, the app and its schemas out of every later walk, and a larger
    young generation collects (and promotes) less often: 2 full passes in the same run, 0.2 s in all. A full pass
    still walks the whole state (about 60-70 ms at 10,000 GPUs); the README's Performance section says so.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


SWITCH_INTERVAL_S = 0.0005  # Python's default is 5 ms


def short_gil_turns() -> None:
    """Let threads waiting for the GIL have it after 0.5 ms of another thread's running, not 5 ms.

    Python's ``sqlite3`` lets go of the GIL for every statement and every row it steps, and while the event loop keeps
    the CPU, a thread taking it back waits out the switch interval each time: at the default, a read of 12,500 rows
    on a worker thread took 22-55 s beside a busy thread (``bench/sqlite_beside_loop.py``), 0.8-7 s at 0.5 ms. The
    interval only matters while two threads want to run; then they trade the GIL ten times as often, which also
    keeps the loop's waits for a worker's Python code short.
    """
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def in_place(settings: Settings) -> bool:
    """Whether to serve with the in-place path (``MFUMON_IN_PLACE``, on by default): off when the settings say so,
    or, with one warning, when this process's uvicorn, h11 or asyncio lack a member it relies on
    (:func:`mfumon.api.server.protocol.in_place_gaps`); every request then goes through the ASGI stack."""
    from mfumon.api.server.protocol import in_place_gaps

    if not settings.IN_PLACE:
        return False
    gaps = in_place_gaps()
    if gaps:
        logging.getLogger(__name__).warning(
            "serving every request through the ASGI stack: the in-place path relies on %s, which this uvicorn/h11 "
            "lacks (set MFUMON_IN_PLACE=0 to say so and silence this)",
            ", ".join(gaps),
        )
        return False
    return True


def connection_guard(app: ASGIApp, settings: Settings, max_connections: int) -> ConnectionGuard:
    """The connection guard :func:`run_app` serves ``app`` with: the settings' deadlines and caps, and, with the
    in-place path (:func:`in_place`), the app's ingest gate, admission and fast door at the door (looked up as the
    app starts, when it has them). Without it the guard keeps only its deadlines and caps: admission, the ingest
    gate and every push are the app's middleware's, as under any other server."""
    from mfumon.api.server.guard import ConnectionGuard

    state = getattr(app, "state", None)
    door = state if state is not None and in_place(settings) else None
    guard = ConnectionGuard(
        header_timeout_seconds=settings.HEADER_TIMEOUT_SECONDS,
        write_timeout_seconds=settings.WRITE_TIMEOUT_SECONDS,
        max_connections=max_connections,
        max_untrusted=max(1, int(max_connections * settings.UNAUTHENTICATED_CONNECTIONS_RATIO)),
        gate=getattr(door, "ingest_gate", None),
        admission=(lambda: getattr(door, "admission", None)) if door is not None else None,
        on_refused=getattr(door, "on_admission_refused", None),
        in_place=(lambda: getattr(door, "fast_door", None)) if door is not None else None,
    )
    if state is not None:
        state.connection_guard = guard  # for /metrics
    return guard


def run_app(app: ASGIApp, settings: Settings, sock: socket.socket | None = None) -> None:
    """Serve ``app`` on ``sock`` (or a socket bound to the settings' host and port) until a signal stops it.

    uvicorn with :class:`~mfumon.api.server.protocol.GuardedH11Protocol`: request-head and write deadlines and a
    connection cap below the file-descriptor limit; repeated log lines are limited once uvicorn has set logging up.
    """
    import uvicorn

    from mfumon.api.server.protocol import GuardedH11Protocol

    sock = sock or bind_socket(settings.HOST, settings.PORT)
    quiet_gc()
    short_gil_turns()
    limit_malloc_arenas(MALLOC_ARENAS)
    guard = connection_guard(app, settings, min(settings.MAX_CONNECTIONS, raise_fd_limit()))
    config = uvicorn.Config(
        app,
        http=GuardedH11Protocol,
        log_level=settings.LOG_LEVEL.lower(),
        access_log=False,
        timeout_keep_alive=settings.KEEPALIVE_TIMEOUT_SECONDS,  # type: ignore[arg-type]
        backlog=2048,
    )
    config.connection_guard = guard  # type: ignore[attr-defined]
    limit_repeats(RepeatLimit(burst=settings.LOG_REPEATS_PER_MINUTE, period_seconds=60.0))
    print(f"{LISTENING_PREFIX}{url_of(sock)}", file=sys.stderr, flush=True)
    logging.getLogger(__name__).info(
        "at most %d connections; %s",
        guard.max_connections,
        "requests taken in place" if guard.admission is not None else "every request through the ASGI stack",
    )
    uvicorn.Server(config).run(sockets=[sock])
