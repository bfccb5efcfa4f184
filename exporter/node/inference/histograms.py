"""A serving engine's latency histogram as the job report carries it: cumulative counts at finite upper bounds.

Prometheus histograms are cumulative twice over: each ``_bucket{le}`` counts the observations at most ``le`` seconds
(so the counts never fall from one edge to the next), and each grows over the process's life (so an interval's share
is the later scrape minus the earlier one, edge by edge). :class:`LatencyHistogram` holds one scrape's numbers, or
one interval's; :meth:`LatencyHistogram.increase` takes the interval's share under the counters' rules (window.py):
after a restart all of the new value belongs to the interval, and a histogram whose edges changed between the scrapes
(the engine came back with other ``--bucket-*`` flags, or as another release) gives none, since buckets with
different edges cannot be subtracted.

What the wire takes (the aggregator's ``LatencyHistogram``): edges in (0, 1e7] seconds, at most 64 of them. Edges
outside are dropped and a longer list is thinned, neither losing an observation: the cumulative count at an edge that
is kept does not change when others go, and ``count`` still holds all of them; only resolution between edges is lost.
SGLang's queue-time histogram starts at ``le="0.0"`` (requests that never waited): without that edge they are counted
at the next one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

__all__ = ["MAX_EDGES", "MAX_EDGE_SECONDS", "LatencyHistogram"]

#: the most finite edges a report's histogram may carry (the aggregator's MAX_HISTOGRAM_BUCKETS)
MAX_EDGES = 64
#: the largest edge a report may carry, in seconds
MAX_EDGE_SECONDS = 1e7


@dataclass(frozen=True)
class LatencyHistogram:
    """Observations by upper bound: ``counts[i]`` of them took at most ``le[i]`` seconds; ``count`` is all of them
    (the ``+Inf`` bucket) and ``sum`` their total seconds.

    Attributes:
        le: finite upper bounds, strictly ascending, each in (0, :data:`MAX_EDGE_SECONDS`].
        counts: the cumulative count at each bound, never falling.
        count: every observation, at least ``counts[-1]``.
        sum: their total, in seconds.
    """

    le: tuple[float, ...]
    counts: tuple[int, ...]
    count: int
    sum: float

    @classmethod
    def from_buckets(
        cls, buckets: Mapping[float, float], total: float, count: float | None = None
    ) -> LatencyHistogram | None:
        """One series as printed: its ``_bucket`` values by edge (``+Inf`` included), ``_sum`` and ``_count``.

        Returns None when it does not add up (no ``+Inf`` bucket and no ``_count``, or counts that fall), which a
        histogram the engine printed whole never does.
        """
        everything = buckets.get(math.inf, count)
        if everything is None:
            return None
        edges = [edge for edge in sorted(buckets) if 0 < edge <= MAX_EDGE_SECONDS]
        edges = _thinned(edges, MAX_EDGES)
        return cls._checked(
            tuple(edges), tuple(round(buckets[edge]) for edge in edges), round(everything), float(total)
        )

    def add(self, other: LatencyHistogram) -> LatencyHistogram | None:
        """Two replicas' histograms summed bucket by bucket; None when their edges differ."""
        if other.le != self.le:
            return None
        counts = tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        return LatencyHistogram(self.le, counts, self.count + other.count, self.sum + other.sum)

    def increase(self, previous: LatencyHistogram | None, restarted: bool) -> LatencyHistogram | None:
        """What was observed since ``previous`` (the earlier scrape's histogram, None when it had none).

        After a restart, or when the histogram is new (engines print a series once it is first observed), all of it
        belongs to the interval. None when the edges changed, or when the difference does not add up (a count fell
        without a restart being seen): a report's histogram is left out rather than sent wrong.
        """
        if restarted or previous is None:
            return self
        if previous.le != self.le:
            return None
        counts = tuple(now - before for now, before in zip(self.counts, previous.counts, strict=True))
        # A sum that stayed put can differ in its last bits; it never shrinks.
        return self._checked(self.le, counts, self.count - previous.count, max(0.0, self.sum - previous.sum))

    def as_json(self) -> dict[str, Any]:
        """The report field's value (``ttft_histogram`` and the others)."""
        return {"le": list(self.le), "counts": list(self.counts), "count": self.count, "sum": self.sum}

    # ``json.dumps(..., default=dict)`` (the agent's ``--inference.list``) prints an object it does not know as
    # ``dict(obj)``: these two make that the wire form.
    @classmethod
    def _checked(
        cls, le: tuple[float, ...], counts: tuple[int, ...], count: int, total: float
    ) -> LatencyHistogram | None:
        if any(b < a for a, b in pairwise(counts)) or (counts and counts[0] < 0):
            return None
        if count < (counts[-1] if counts else 0) or not math.isfinite(total) or total < 0:
            return None
        return cls(le, counts, count, total)


def _thinned(edges: list[float], most: int) -> list[float]:
    """At most ``most`` of ``edges``, evenly spaced and always the largest (where long tails are told apart)."""
    if len(edges) <= most:
        return edges
    step = math.ceil(len(edges) / most)
    return edges[::-1][::step][::-1]
