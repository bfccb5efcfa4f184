"""The price list (issue 60): what ``PUT /v1/prices`` and ``MFUMON_PRICES_FILE`` take, what ``GET /v1/prices`` shows.

Every price is a finite number >= 0 (a free pool is priced 0 on purpose; a pool left out is unpriced, which is
not the same). Keys are bounded like every label: at most 256 pools and 256 devices.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from mfumon.api.schemas._common import _BLANK_CLASS, _CONTROLS, Number

Price = Annotated[Number, Field(ge=0, le=1e6)]
DEVICE_KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
#: A pool as exporters and schedulers name it: printable, no blank at either end, at most 128 characters.
POOL_KEY = re.compile(rf"^[^{_CONTROLS}{_BLANK_CLASS}](?:[^{_CONTROLS}]{{0,126}}[^{_CONTROLS}{_BLANK_CLASS}])?$")


def _keys(pattern: re.Pattern[str], what: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        bad = sorted(key for key in value if not pattern.match(key))
        if bad:
            raise ValueError(f"{what}: {[k[:40] for k in bad[:3]]} do not match {pattern.pattern}")
        return value

    return check


# The keys' rule is stated as ``propertyNames`` (what a client, and Schemathesis, reads) and checked by a validator,
# as the job's software fingerprint is (mfumon.api.schemas.jobs.Software).
PoolPrices = Annotated[
    dict[str, Price],
    Field(max_length=256, json_schema_extra={"propertyNames": {"pattern": POOL_KEY.pattern}}),
    AfterValidator(_keys(POOL_KEY, "pool names")),
]
DevicePrices = Annotated[
    dict[str, Price],
    Field(max_length=256, json_schema_extra={"propertyNames": {"pattern": DEVICE_KEY.pattern}}),
    AfterValidator(_keys(DEVICE_KEY, "device keys (the peak table's, e.g. h100-sxm)")),
]
Currency = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,15}$")]


class GpuHourPrices(BaseModel):
    """Price of one GPU-hour: by pool first, then by device (the peak table's key, as jobs show it in `device`),
    then `default`. A GPU none of them prices is unpriced: reported as such, never as 0."""

    model_config = ConfigDict(extra="forbid")

    pools: PoolPrices = Field(default_factory=dict)
    devices: DevicePrices = Field(default_factory=dict)
    default: Price | None = None


class PricesIn(BaseModel):
    """A whole price list: it replaces the one in effect from the moment it is stored (history kept)."""

    model_config = ConfigDict(extra="forbid")

    currency: Currency = Field(default="USD", description="named on every cost (ISO 4217 code or your own unit)")
    gpu_hour: GpuHourPrices = Field(default_factory=GpuHourPrices)
    kwh: Price | None = Field(default=None, description="price of a kWh the GPUs drew; null: energy is not priced")
    pue: Annotated[Number, Field(ge=1, le=5)] = Field(
        default=1.0, description="power usage effectiveness: facility energy / IT energy, multiplies the kWh price"
    )


class PricesPublic(PricesIn):
    """The price list in effect, who set it and when (`set_by`: a token name, or `file:PATH`)."""

    model_config = ConfigDict(extra="forbid")

    set_at: float | None = Field(description="when it took effect (Unix seconds); null: no price list was ever set")
    set_by: str | None


class PricesHistory(BaseModel):
    """Every price list stored, newest first: a job that spans a change was billed by each in its time."""

    current: PricesPublic
    history: list[PricesPublic]
