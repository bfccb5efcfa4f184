"""Stop on SIGINT/SIGTERM: the one loop-stopping idiom of every long-running command.

Each daemon (exporter, scheduler sync, remediation, demo) waits on a ``threading.Event`` and stops when the process is
asked to; the previous handlers come back on exit, so a command run inside another (a test, the demo) leaves the
process as it found it.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

logger = logging.getLogger(__name__)

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """Yield an event set by SIGINT or SIGTERM; restore the previous handlers when the block ends."""
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        logger.info("received signal %d, stopping", signum)
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in _SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
