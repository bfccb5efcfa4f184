"""What a latency histogram's buckets can say, and no more: the share of observations within a target, as bounds,
and a quantile, as an estimate inside its bucket.

A Prometheus histogram counts observations at most each bucket's upper bound (``le``). The share within a target
``t`` is exact when ``t`` is a bucket edge; otherwise it lies between the cumulative count at the largest edge below
``t`` and the one at the smallest edge above it: the width of the bound is the share of observations in the bucket
that straddles the target. Quantiles interpolate linearly inside their bucket, as PromQL's ``histogram_quantile``
does; one that falls in the ``+Inf`` bucket is reported as the last finite edge (a floor, flagged).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Buckets", "Quantile", "WithinTarget"]


@dataclass(frozen=True, slots=True)
class WithinTarget:
    """How many of ``total`` observations were within a target: at least ``low``, at most ``high``."""

    total: int
    low: int
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high

    def ratio(self) -> tuple[float, float] | None:
        """(lower, upper) share within the target; None without observations."""
        if self.total <= 0:
            return None
        return self.low / self.total, self.high / self.total

    def __add__(self, other: WithinTarget) -> WithinTarget:
        return WithinTarget(self.total + other.total, self.low + other.low, self.high + other.high)


@dataclass(frozen=True, slots=True)
class Quantile:
    """A quantile's estimate, and the bucket it lies in (``upper`` None: beyond the last finite edge)."""

    seconds: float
    lower: float
    upper: float | None

    @property
    def open_ended(self) -> bool:
        return self.upper is None


@dataclass(frozen=True, slots=True)
class Buckets:
    """One histogram's cumulative buckets: ``counts[i]`` observations at most ``le[i]``; ``count`` all of them."""

    le: Sequence[float]
    counts: Sequence[int]
    count: int
    sum: float = 0.0

    def within(self, target: float) -> WithinTarget:
        """Observations within ``target`` seconds, as bounds from the two edges around it."""
        below = bisect_right(self.le, target)  # edges <= target
        low = self.counts[below - 1] if below else 0
        above = bisect_left(self.le, target)  # first edge >= target
        high = self.counts[above] if above < len(self.le) else self.count
        return WithinTarget(self.count, low, high)

    def quantile(self, q: float) -> Quantile | None:
        """The ``q`` quantile (0 < q < 1) by linear interpolation in its bucket; None without observations."""
        if self.count <= 0 or not 0 < q < 1:
            return None
        rank = q * self.count
        index = bisect_left(self.counts, rank)
        if index >= len(self.le):
            last = self.le[-1] if self.le else 0.0
            return Quantile(seconds=last, lower=last, upper=None)
        lower = self.le[index - 1] if index else 0.0
        below = self.counts[index - 1] if index else 0
        in_bucket = self.counts[index] - below
        fraction = (rank - below) / in_bucket if in_bucket else 1.0
        return Quantile(seconds=lower + (self.le[index] - lower) * fraction, lower=lower, upper=self.le[index])
