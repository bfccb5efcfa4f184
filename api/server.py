"""Serving the aggregator: bind the listening socket ourselves, say where we listen, then run uvicorn on it.

Binding before uvicorn starts gives a clear error and a non-zero exit for a busy port, and lets ``--port 0`` work:
the kernel picks a free port and the ``listening on`` line says which, so nothing has to guess a free port first.
"""

from __future__ import annotations

import os
import socket
import sys

from starlette.types import ASGIApp

from api.core.config import Settings

LISTENING_PREFIX = "mfumon serve: listening on "


class BindError(OSError):
    """The address cannot be listened on (in use, not local, no permission)."""


def bind_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: the kernel picks one), with SO_REUSEADDR like uvicorn's."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        return socket.create_server((address, port), family=family, backlog=backlog)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise BindError(exc.errno, f"cannot listen on {host}:{port}: {reason}") from exc


def url_of(sock: socket.socket) -> str:
    """The ``http://host:port`` a bound socket answers on (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if sock.family == socket.AF_INET6 else f"http://{host}:{port}"


def run_app(app: ASGIApp, settings: Settings, sock: socket.socket | None = None) -> None:
    """Serve ``app`` on ``sock`` (or a socket bound to the settings' host and port) until a signal stops it."""
    import uvicorn

    sock = sock or bind_socket(settings.HOST, settings.PORT)
    print(f"{LISTENING_PREFIX}{url_of(sock)}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level=settings.LOG_LEVEL.lower(), access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
