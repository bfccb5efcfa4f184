"""Resolve exporter-reported GPU names to peak-table devices, once per distinct name."""

from __future__ import annotations

import threading

from mfumon.mfu import PeakTable


class DeviceResolver:
    """Caches ``(name, mig_profile) -> (device key, dense bf16 peak)``: a cluster has few distinct names."""

    def __init__(self, table: PeakTable) -> None:
        self.table = table
        self._cache: dict[tuple[str, str | None], tuple[str | None, float | None]] = {}
        self._fractions: dict[tuple[str, str], float | None] = {}
        self._lock = threading.Lock()

    def resolve(self, name: str, mig_profile: str | None) -> tuple[str | None, float | None]:
        key = (name, mig_profile)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        lookup = self.table.lookup(name, "bf16", mig_profile=mig_profile)
        result = (lookup.device_key, lookup.peak_flops_per_gpu)
        with self._lock:
            self._cache[key] = result
        return result

    def mig_fraction(self, name: str, mig_profile: str) -> float | None:
        """The share of its GPU a MIG instance of ``mig_profile`` gets (compute slices / the GPU's), or None when
        the peak table cannot tell (an unknown device or profile)."""
        key = (name, mig_profile)
        if key in self._fractions:
            return self._fractions[key]
        fraction = self.table.lookup(name, "bf16", mig_profile=mig_profile).mig_fraction
        with self._lock:
            self._fractions[key] = fraction
        return fraction
