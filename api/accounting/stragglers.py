"""Stragglers: how unevenly a job's GPUs work, from the tensor-pipe activity the exporters report.

In a synchronous job every rank waits for the slowest at each collective, so the GPUs of a healthy job show about
the same tensor activity. The spread is ``(max - min) / max`` over the job's GPUs that report ``tensor_active``
(at least two): 0 when they are even, towards 1 when some do far less than others. The GPU everyone waits for is
the *busiest* one (its kernels take longest: a lower clock, a throttled or degraded part), the idle ones are the
waiters; a GPU idler than its peers waits on its own input (data, a slow NIC).
"""

from __future__ import annotations

from collections.abc import Iterable


def tensor_spread(values: Iterable[float]) -> float | None:
    """``(max - min) / max`` of the tensor activities; None with fewer than two or all idle."""
    low = high = None
    count = 0
    for value in values:
        count += 1
        low = value if low is None or value < low else low
        high = value if high is None or value > high else high
    if count < 2 or not high or high <= 0 or low is None:
        return None
    return (high - low) / high


def spread_of_range(low: float | None, high: float | None, count: int) -> float | None:
    """The spread from a precomputed min and max (a node view's per-job range)."""
    if count < 2 or low is None or high is None or high <= 0:
        return None
    return (high - low) / high
