"""The price list: what GPU-hours and energy cost (``GET``/``PUT /v1/prices``, ``mfumon.api.services.prices``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from mfumon.api.deps import ContextDep, PricesWriter
from mfumon.api.route_table import route_spec
from mfumon.api.schemas.prices import PricesHistory, PricesIn, PricesPublic
from mfumon.api.services import prices

router = APIRouter(prefix="/v1/prices", tags=["prices"])


@router.get("", response_model=PricesHistory)
def read_prices(
    ctx: ContextDep,
    history: Annotated[int, Query(ge=0, le=1000, description="how many stored price lists to list, newest first")] = 20,
) -> PricesHistory:
    """The price list in effect and the ones before it (who set each, and when)."""
    return prices.read_prices(ctx, history=history)


@router.put("", response_model=PricesPublic)
@route_spec("prices")
def set_prices(body: PricesIn, ctx: ContextDep, principal: PricesWriter) -> PricesPublic:
    """Replace the price list from now on: what is billed after this is priced by it, what was billed before keeps
    its price. Pools and devices left out are unpriced (reported as such, never as 0)."""
    return prices.set_prices(ctx, body, principal)
