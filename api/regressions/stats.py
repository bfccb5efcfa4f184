"""The statistics a software change is judged by: Welch's t-test and the Student t intervals of two groups' means.

Small groups (a handful of jobs of one signature on each side of an upgrade) need the t distribution, not the
normal; its CDF comes from the regularized incomplete beta function (a continued fraction, Lentz's method, as in
Numerical Recipes 6.4), so no SciPy. tests/api/regressions/test_stats.py checks it against published t tables.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

_EPS = 3e-14
_TINY = 1e-300


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (converges for x < (a + 1) / (a + b + 2))."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


@functools.lru_cache(maxsize=4096)
def t_quantile(probability: float, df: float) -> float:
    """The t with P(T <= t) = `probability` (0.5 < probability < 1), by bisection on the CDF (a few hundred
    evaluations of it). Remembered: the intervals ask for the same few (95 %, n - 1) on every recompute."""
    low, high = 0.0, 1.0
    while 1.0 - t_two_sided_p(high, df) / 2.0 < probability:
        high *= 2.0
    for _ in range(100):
        mid = (low + high) / 2.0
        if 1.0 - t_two_sided_p(mid, df) / 2.0 < probability:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


@dataclass(frozen=True, slots=True)
class Estimate:
    """A group's mean with its 95 % Student t interval, and the spread (sample standard deviation) seen."""

    mean: float
    low: float
    high: float
    spread: float
    n: int


def estimate(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """The mean of `values` (at least two) and its interval."""
    n = len(values)
    mean = statistics.fmean(values)
    spread = statistics.stdev(values) if n > 1 else 0.0
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * spread / math.sqrt(n) if n > 1 else math.inf
    return Estimate(mean, mean - half, mean + half, spread, n)


@dataclass(frozen=True, slots=True)
class Welch:
    """Welch's unequal-variance t-test of two groups' means: the statistic, its degrees of freedom, the p-value."""

    t: float
    df: float
    p_value: float


def welch(before: Sequence[float], after: Sequence[float]) -> Welch:
    """Welch's t-test (two-sided) of `after`'s mean against `before`'s; each group needs two values or more."""
    n1, n2 = len(before), len(after)
    v1, v2 = statistics.variance(before) / n1, statistics.variance(after) / n2
    diff = statistics.fmean(after) - statistics.fmean(before)
    if v1 + v2 == 0.0:  # identical values on each side: any difference is certain, none is none
        return Welch(math.copysign(math.inf, diff) if diff else 0.0, n1 + n2 - 2.0, 0.0 if diff else 1.0)
    t = diff / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
    return Welch(t, df, t_two_sided_p(t, df))
