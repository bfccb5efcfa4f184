"""Prices per GPU-hour by device, for the cost columns of ``mfumon report``.

A price list is ``DEVICE=PRICE`` pairs, the device spelled as the peak table's key (``h100-sxm``, as the API shows
it in ``device``), from ``--price`` options or ``MFUMON_GPU_HOUR_PRICES`` (comma-separated); ``default=PRICE``
prices every other device. Without any, the report has no cost columns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

ENV = "MFUMON_GPU_HOUR_PRICES"
DEFAULT = "default"
_DEVICE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Prices:
    """Price of one GPU-hour per device key, in ``currency``."""

    per_device: Mapping[str, float] = field(default_factory=dict)
    currency: str = "USD"

    def __bool__(self) -> bool:
        return bool(self.per_device)

    def of(self, device: str | None) -> float | None:
        """The price of a GPU-hour on ``device``; None when neither it nor ``default`` is priced."""
        if device is not None and device in self.per_device:
            return self.per_device[device]
        return self.per_device.get(DEFAULT)

    def of_mix(self, gpus_by_device: Mapping[str | None, float]) -> float | None:
        """The mean price of a GPU-hour over a mix of devices (GPU counts); None if any GPU of it is unpriced."""
        total = sum(gpus_by_device.values())
        if total <= 0:
            return self.per_device.get(DEFAULT)
        cost = 0.0
        for device, gpus in gpus_by_device.items():
            price = self.of(device)
            if price is None:
                return None
            cost += price * gpus
        return cost / total


def parse_prices(items: Iterable[str], currency: str = "USD") -> Prices:
    """``["h100-sxm=2.49", "default=1.2"]`` (each item may hold several, comma-separated) -> :class:`Prices`."""
    prices: dict[str, float] = {}
    for item in items:
        for pair in filter(None, (p.strip() for p in item.split(","))):
            device, sep, value = pair.partition("=")
            device = device.strip().lower()
            if not sep or not _DEVICE.match(device):
                raise ValueError(f"price {pair!r}: expected DEVICE=PRICE, e.g. h100-sxm=2.49")
            try:
                price = float(value)
            except ValueError:
                raise ValueError(f"price {pair!r}: {value.strip()!r} is not a number") from None
            if not math.isfinite(price) or price < 0:
                raise ValueError(f"price {pair!r}: a price per GPU-hour is a finite number >= 0")
            prices[device] = price
    return Prices(prices, currency)
