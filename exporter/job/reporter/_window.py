"""The in-memory accumulator behind ``JobReporter.step()``: sums under a short lock, cut into intervals.

Interval boundaries are the times of ``step()`` calls, not of the background flushes, so every token is
attributed to the wall time in which it was produced: a report covers the steps that *completed* after the
previous report's last step, over the time from that step to its own last step. Steps longer than the flush
period therefore never show up as an alternating 0 / 2x rate, and idle time before the training loop is not
counted. The first ``step()`` call without ``step_seconds`` only starts the clock (a warm-up step, as
nanoGPT and torchtitan skip theirs); passing ``step_seconds`` on it counts it too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any


class StepWindow:
    """Per-interval sums of step() and record_throughput() calls; every method is thread-safe."""

    __slots__ = (
        "_boundary",
        "_clock",
        "_comm_n",
        "_comm_sum",
        "_last",
        "_lock",
        "_rate_step_n",
        "_rate_step_sum",
        "_rates",
        "_rates_since",
        "_reported_step",
        "_step_n",
        "_step_sum",
        "_steps",
        "_tokens",
        "_total_steps",
        "_wait_n",
        "_wait_sum",
        "last_mean_step_seconds",
    )

    def __init__(self, clock: Callable[[], float] = perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._boundary: float | None = None
        self._last = 0.0
        self._total_steps = 0
        self._reported_step: int | None = None
        self._rates: dict[str, list[float]] = {}
        self._rates_since = clock()
        self.last_mean_step_seconds: float | None = None
        self._reset()

    def _reset(self) -> None:
        self._tokens = 0
        self._steps = 0
        self._step_sum = self._comm_sum = self._wait_sum = self._rate_step_sum = 0.0
        self._step_n = self._comm_n = self._wait_n = self._rate_step_n = 0

    def add(
        self,
        tokens: int,
        step_seconds: float | None = None,
        comm_seconds: float | None = None,
        data_wait_seconds: float | None = None,
    ) -> None:
        """Record one finished step (the hot path: a clock read and a few additions under the lock)."""
        now = self._clock()
        with self._lock:
            self._total_steps += 1
            if self._boundary is None:
                if step_seconds is None:
                    self._boundary = now  # warm-up step: only starts the clock
                    return
                self._boundary = now - step_seconds
            self._tokens += tokens
            self._steps += 1
            if now > self._last:  # two threads may read the clock in one order and lock in the other
                self._last = now
            if step_seconds is not None:
                self._step_sum += step_seconds
                self._step_n += 1
            if comm_seconds is not None or data_wait_seconds is not None:
                self._add_times(comm_seconds, data_wait_seconds)

    def add_rate(
        self,
        tokens_per_second: float | None,
        step_seconds: float | None = None,
        source: str = "",
        step: int | None = None,
        comm_seconds: float | None = None,
        data_wait_seconds: float | None = None,
    ) -> None:
        """Record figures someone else measured (a log line): sources are summed, repeats averaged.

        ``tokens_per_second`` None records only the times (a timers table printed apart from the rate).
        """
        with self._lock:
            if tokens_per_second is not None:
                entry = self._rates.get(source)
                if entry is None:
                    self._rates[source] = [tokens_per_second, 1.0]
                else:
                    entry[0] += tokens_per_second
                    entry[1] += 1.0
            if step_seconds is not None:
                self._rate_step_sum += step_seconds
                self._rate_step_n += 1
            if comm_seconds is not None or data_wait_seconds is not None:
                self._add_times(comm_seconds, data_wait_seconds)
            if step is not None:
                self._reported_step = step

    def _add_times(self, comm_seconds: float | None, data_wait_seconds: float | None) -> None:
        """Add a step's exposed communication and data wait (the caller holds the lock)."""
        if comm_seconds is not None:
            self._comm_sum += comm_seconds
            self._comm_n += 1
        if data_wait_seconds is not None:
            self._wait_sum += data_wait_seconds
            self._wait_n += 1

    def take(self, stall_after_seconds: float | None = None) -> dict[str, Any] | None:
        """Cut the interval: the report's throughput fields, or None when there is nothing to say.

        With no step since the last report for more than ``stall_after_seconds``, returns a zero-token report
        over the time since the last step (a hung job shows MFU 0) without moving the boundary.
        """
        now = self._clock()
        with self._lock:
            if self._rates:
                return self._take_rates(now)
            if self._steps == 0:
                if self._boundary is None or stall_after_seconds is None:
                    return None
                idle = now - self._boundary
                return {"tokens": 0, "interval_seconds": idle} if idle > stall_after_seconds else None
            interval = self._last - self._boundary  # type: ignore[operator]
            if interval <= 0:
                return None
            fields: dict[str, Any] = {"tokens": int(self._tokens), "interval_seconds": interval}
            mean_step = self._step_sum / self._step_n if self._step_n else interval / self._steps
            fields["step_seconds"] = mean_step
            if self._comm_n:
                fields["comm_seconds"] = self._comm_sum / self._comm_n
            if self._wait_n:
                fields["data_wait_seconds"] = self._wait_sum / self._wait_n
            fields["step"] = self._total_steps
            self.last_mean_step_seconds = mean_step
            self._boundary = self._last
            self._reset()
            return fields

    def _take_rates(self, now: float) -> dict[str, Any]:
        rate = sum(total / count for total, count in self._rates.values())
        if self._steps and self._boundary is not None and self._last > self._boundary:
            rate += self._tokens / (self._last - self._boundary)  # both kinds of input in one interval
            self._boundary = self._last
        fields: dict[str, Any]
        if rate > 0:
            fields = {"tokens_per_second": rate}
        else:  # the interface wants a positive rate; zero throughput is zero tokens over the interval
            fields = {"tokens": 0, "interval_seconds": max(now - self._rates_since, 1e-3)}
        if self._rate_step_n:
            fields["step_seconds"] = self._rate_step_sum / self._rate_step_n
            self.last_mean_step_seconds = fields["step_seconds"]
        if self._comm_n:
            fields["comm_seconds"] = self._comm_sum / self._comm_n
        if self._wait_n:
            fields["data_wait_seconds"] = self._wait_sum / self._wait_n
        if self._reported_step is not None:
            fields["step"] = self._reported_step
        self._rates = {}
        self._rates_since = now
        self._reset()
        return fields
