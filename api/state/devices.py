"""Resolve exporter-reported GPU names to peak-table devices, once per distinct name."""

from __future__ import annotations

import threading

from mfumon.mfu import PeakTable


class DeviceResolver:
    """Caches ``(name, mig_profile) -> (device key, dense bf16 peak)``: a cluster has few distinct names."""

    def __init__(self, table: PeakTable) -> None:
        self.table = table
        self._cache: dict[tuple[str, str | None], tuple[str | None, float | None]] = {}
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
