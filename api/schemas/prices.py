"""The price list (issue 60): what ``PUT /v1/prices`` and ``MFUMON_PRICES_FILE`` take, what ``GET /v1/prices`` shows.

Every price is a finite number >= 0 (a free pool is priced 0 on purpose; a pool left out is unpriced, which is
not the same). Keys are bounded like every label: at most 256 pools and 256 devices.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from mfumon.api.schemas._common import Label, Number

Price = Annotated[Number, Field(ge=0, le=1e6)]
DeviceKey = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
Currency = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,15}$")]


class GpuHourPrices(BaseModel):
    """Price of one GPU-hour: by pool first, then by device (the peak table's key, as jobs show it in `device`),
    then `default`. A GPU none of them prices is unpriced: reported as such, never as 0."""

    model_config = ConfigDict(extra="forbid")

    pools: dict[Label, Price] = Field(default_factory=dict, max_length=256)
    devices: dict[DeviceKey, Price] = Field(default_factory=dict, max_length=256)
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
