"""Background work that leaves the event loop its share of the GIL.

Python runs one thread at a time. A thread that computes for 100 ms (cluster-wide sums over 100,000 GPUs for the
periodic billing) gets the GIL almost the whole time, because the event loop gives it up on every socket call and
then waits for it: at 80% load, ingest stalled for the length of that computation (p99 110 ms at 100,000 GPUs,
against 25-45 ms without it; ``bench/``). A :class:`Pacer` makes such work sleep in proportion to the CPU it used,
so that it takes a bounded share of the time and the loop keeps up; the work takes ``1 / duty`` times longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

BACKGROUND_DUTY = 0.2  # the share of the time paced background work may compute


class Pacer:
    """Call it often (per node, per row) from a background thread: once ``slice_s`` of the thread's CPU time is
    spent, it sleeps long enough that the thread computed ``duty`` of the time since."""

    def __init__(
        self,
        duty: float = BACKGROUND_DUTY,
        *,
        slice_s: float = 0.002,
        cpu_clock: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not 0 < duty <= 1:
            raise ValueError(f"duty must be in (0, 1], got {duty}")
        self._rest_per_cpu_s = (1 - duty) / duty
        self._slice_s = slice_s
        self._cpu_clock = cpu_clock
        self._sleep = sleep
        self._since = cpu_clock()
        self.slept_s = 0.0

    def __call__(self) -> None:
        spent = self._cpu_clock() - self._since
        if spent >= self._slice_s:
            rest = spent * self._rest_per_cpu_s
            self._sleep(rest)
            self.slept_s += rest
            self._since = self._cpu_clock()


def unpaced() -> None:
    """The pace of work that answers a request: none."""
