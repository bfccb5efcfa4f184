"""Run a child command for ``mfumon wrap``: output passed through byte for byte, signals forwarded.

The child's stdout and stderr are pipes read by one thread each with ``os.read``, so every chunk is written to
our own stdout/stderr as soon as it arrives, unchanged; complete lines are also handed to a callback for
parsing. The child runs in its own process group so that a terminal's Ctrl-C reaches it once (forwarded by
us) rather than twice; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from time import monotonic
from typing import Any

logger = logging.getLogger(__name__)

LineCallback = Callable[[str, float], None]

FORWARDED_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)


def exit_status(returncode: int) -> int:
    """A shell-style exit status: a child killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _write_all(fd: int, data: bytes) -> bool:
    """Write every byte to ``fd``; False once the reader has gone away (EPIPE), so we stop trying."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BrokenPipeError:
            return False
        except InterruptedError:
            continue
        view = view[written:]
    return True


def _pump(source: int, sink: int, on_line: LineCallback) -> None:
    """Copy ``source`` to ``sink`` chunk by chunk; feed complete lines (``\\n`` or ``\\r``) to ``on_line``."""
    pending = b""
    sink_open = True
    while True:
        try:
            chunk = os.read(source, 65536)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        if sink_open:
            sink_open = _write_all(sink, chunk)
        pending += chunk
        *lines, pending = pending.replace(b"\r", b"\n").split(b"\n")
        if len(pending) > 65536:  # a line without end (a progress bar): parse what we have, keep going
            lines.append(pending)
            pending = b""
        now = monotonic()
        for line in lines:
            if line:
                on_line(line.decode("utf-8", errors="replace"), now)
    if pending:
        on_line(pending.decode("utf-8", errors="replace"), monotonic())


@contextlib.contextmanager
def _forwarding(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """Forward our signals to the child for as long as it runs, then restore the previous handlers."""

    def forward(signum: int, frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in FORWARDED_SIGNALS:
            previous[signum] = signal.signal(signum, forward)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_child(
    argv: Sequence[str],
    on_line: LineCallback,
    env: Mapping[str, str] | None = None,
) -> int:
    """Run ``argv`` to completion, passing its output through; returns its shell-style exit status.

    Raises ``OSError`` when the command cannot be started (not found, not executable).
    """
    group: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
    lock = threading.Lock()

    def locked(line: str, now: float) -> None:
        with lock:  # the two pumps share one parser
            try:
                on_line(line, now)
            except Exception:  # a parsing bug must never stop the output from flowing
                logger.exception("mfumon wrap: error while parsing a log line")

    proc = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env) if env else None, **group
    )
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout.fileno(), 1, locked), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr.fileno(), 2, locked), daemon=True),
    ]
    with _forwarding(proc):
        for pump in pumps:
            pump.start()
        returncode = proc.wait()
        for pump in pumps:  # a grandchild may keep the pipes open after the child exits: don't wait forever
            pump.join(timeout=5.0)
    if not any(pump.is_alive() for pump in pumps):
        proc.stdout.close()
        proc.stderr.close()
    return exit_status(returncode)
