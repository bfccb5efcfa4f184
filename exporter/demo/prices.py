"""The demo's price list (issue 60): what its aggregator bills GPU-hours and energy at, so that the cost and energy
panels, ``GET /v1/chargeback`` and ``/ui/chargeback`` have numbers to show.

Dense list prices per GPU-hour by device (the peak table's keys of the demo's GPUs), one pool priced on its own (the
reserve pool, held on a committed rate), a price per kWh with the data centre's PUE, and no ``default``: the MI300X
node (pool ``train-mi300x``) is left **unpriced**, so its GPU-hours show as unpriced rather than as a cost of 0.
``mfumon demo`` writes it to its data directory and points ``MFUMON_PRICES_FILE`` at it (unless that is set); the
live deployment tests give their aggregators the same list. deploy/prices.example.yml is the operator's example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["DEMO_PRICES", "UNPRICED_DEMO_POOL", "write_demo_prices"]

DEMO_PRICES: dict[str, Any] = {
    "currency": "USD",
    "gpu_hour": {
        "pools": {"reserve-h100": 1.10},
        "devices": {"h100-sxm": 2.49, "a100-sxm-80gb": 1.29, "b200": 4.99},
    },
    "kwh": 0.12,
    "pue": 1.3,
}
#: The demo's pool no price covers (its MI300X GPUs have no device price, and there is no default).
UNPRICED_DEMO_POOL = "train-mi300x"


def write_demo_prices(directory: Path) -> Path:
    """Write :data:`DEMO_PRICES` to ``directory/prices.yml``; its path."""
    path = directory / "prices.yml"
    path.write_text(
        "# mfumon demo's price list (MFUMON_PRICES_FILE): written by mfumon demo at each start.\n"
        + yaml.safe_dump(DEMO_PRICES, sort_keys=False)
    )
    return path
