"""The operator's price list as the billing applies it: a price per GPU-hour by pool, by GPU model or by default,
and optionally a price per kWh with the data centre's PUE.

A GPU-second is priced by the first of: its node's pool (the first of its pools, by name, that has a price), its
device (the peak table's key, ``h100-sxm``), ``default``. With none of them it is **unpriced**: counted as
unpriced GPU-seconds, never as cost 0, so a report can say which part of the bill it cannot price. Energy is priced
only with a price per kWh: joules x PUE / 3.6e6 x that price, on top of the GPU-hour price (a GPU-hour price that
already includes power is simply given without ``kwh``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True, slots=True)
class PriceList:
    """Prices in ``currency``; empty mappings and None mean "not priced"."""

    currency: str = "USD"
    pools: Mapping[str, float] = field(default_factory=dict)  # pool -> price per GPU-hour
    devices: Mapping[str, float] = field(default_factory=dict)  # peak-table key -> price per GPU-hour
    default: float | None = None  # every other GPU
    kwh: float | None = None  # price per kWh drawn by the GPUs (x PUE)
    pue: float = 1.0
    set_at: float | None = None  # when this list took effect (Unix seconds); None: never set
    set_by: str | None = None  # the token name or file that set it

    def __bool__(self) -> bool:
        return bool(self.pools or self.devices or self.default is not None or self.kwh is not None)

    def gpu_hour(self, pools: Iterable[str], device: str | None) -> float | None:
        """The price of a GPU-hour on ``device`` in a node of ``pools``; None when nothing prices it."""
        for pool in sorted(pools):
            price = self.pools.get(pool)
            if price is not None:
                return price
        if device is not None and (price := self.devices.get(device)) is not None:
            return price
        return self.default

    def gpu_second(self, pools: Iterable[str], device: str | None) -> float | None:
        price = self.gpu_hour(pools, device)
        return None if price is None else price / 3600.0

    @property
    def per_joule(self) -> float | None:
        """Price of one joule the GPUs drew, PUE included; None without a price per kWh."""
        return None if self.kwh is None else self.kwh * self.pue / JOULES_PER_KWH

    def as_json(self) -> dict[str, object]:
        return {
            "currency": self.currency,
            "gpu_hour": {"pools": dict(self.pools), "devices": dict(self.devices), "default": self.default},
            "kwh": self.kwh,
            "pue": self.pue,
        }

    @classmethod
    def from_json(
        cls, document: Mapping[str, object], *, set_at: float | None = None, set_by: str | None = None
    ) -> PriceList:
        """From a document :class:`mfumon.api.schemas.prices.PricesIn` validated (or a stored one)."""
        gpu_hour = document.get("gpu_hour") or {}
        assert isinstance(gpu_hour, Mapping)
        kwh, pue = document.get("kwh"), document.get("pue")
        return cls(
            currency=str(document.get("currency") or "USD"),
            pools={str(k): float(v) for k, v in (gpu_hour.get("pools") or {}).items()},
            devices={str(k): float(v) for k, v in (gpu_hour.get("devices") or {}).items()},
            default=None if gpu_hour.get("default") is None else float(gpu_hour["default"]),
            kwh=None if kwh is None else float(kwh),  # type: ignore[arg-type]
            pue=1.0 if pue is None else float(pue),  # type: ignore[arg-type]
            set_at=set_at,
            set_by=set_by,
        )


NO_PRICES = PriceList()


def known_cost(cost: float, gpu_seconds: float, unpriced_gpu_seconds: float) -> float | None:
    """A billed amount, or None when none of it was priced: GPU-seconds no price covered are never a cost of 0.

    ``cost`` holds what was priced (GPU-hours and energy); anything above 0 is known, and so is an amount with no
    GPU-seconds at all (nothing to price) or with some GPU-seconds a price covered (a free pool costs 0)."""
    if cost > 0 or gpu_seconds <= 0 or gpu_seconds > unpriced_gpu_seconds * (1 + 1e-12):
        return cost
    return None
