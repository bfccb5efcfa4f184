"""Durable counters as this process last read them: the sum of their shards, never going down.

Every replica reads the same rows, so every replica exports the same values once it has polled; a replica that
reads a row late (or out of order) keeps the larger value it already holds, so what it exports only grows. Shards
are summed with ``math.fsum`` (correctly rounded, so independent of the order rows arrived in): every replica
exports the same bits.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from mfumon.api.crud.counters import CounterValue


class DurableCounters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, dict[str, dict[int, float]]] = {}  # name -> labels -> shard -> value

    def apply(self, rows: Iterable[CounterValue]) -> None:
        with self._lock:
            for name, labels, shard, value in rows:
                shards = self._families.setdefault(name, {}).setdefault(labels, {})
                if value > shards.get(shard, 0.0):
                    shards[shard] = value

    def series(self, name: str) -> list[tuple[str, float]]:
        """``(labels, value)`` of every series of ``name``, sorted by labels."""
        with self._lock:
            family = self._families.get(name, {})
            return sorted((labels, math.fsum(shards.values())) for labels, shards in family.items())

    def value(self, name: str, labels: str) -> float:
        with self._lock:
            return math.fsum(self._families.get(name, {}).get(labels, {}).values())
