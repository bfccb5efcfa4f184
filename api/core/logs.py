"""Logging for ``mfumon serve``: the same line repeated many times is written a few times per minute, then counted.

Under a flood (a resource running out, thousands of bad requests) a line repeated per event filled 58 MB of logs
and the disk with it. A line is "the same" when its logger, level and message template are; distinct templates
(a job id formatted into the message) are tracked in a bounded table, so the filter cannot grow without end either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

_MAX_KEYS = 1024


@dataclass
class _Window:
    started: float
    passed: int = 0
    suppressed: int = 0


class RepeatLimit(logging.Filter):
    """Let ``burst`` records of one kind through per ``period_s``; count the rest and say so on the next one through."""

    def __init__(
        self, burst: int = 10, period_seconds: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.burst = burst
        self.period_seconds = period_seconds
        self._clock = clock
        self._windows: OrderedDict[tuple[str, int, str], _Window] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            window = self._windows.get(key)
            if window is None or now - window.started >= self.period_seconds:
                suppressed = window.suppressed if window is not None else 0
                window = self._windows[key] = _Window(now)
                if suppressed:
                    record.msg = f"{record.msg} [and {suppressed} more like this in the last {self.period_seconds:g} s]"
            self._windows.move_to_end(key)
            while len(self._windows) > _MAX_KEYS:
                self._windows.popitem(last=False)
            if window.passed < self.burst:
                window.passed += 1
                return True
            window.suppressed += 1
            return False


def limit_repeats(
    limit: RepeatLimit, loggers: tuple[str, ...] = ("", "uvicorn", "uvicorn.error", "uvicorn.access")
) -> None:
    """Put ``limit`` on every handler of these loggers (a filter on a handler sees the records of all children)."""
    for name in loggers:
        for handler in logging.getLogger(name).handlers:
            if limit not in handler.filters:
                handler.addFilter(limit)
