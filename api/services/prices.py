"""The price list in effect: read from ``MFUMON_PRICES_FILE`` at start-up, set by ``PUT /v1/prices``, followed by
every replica (the billing reads the newest row each interval), applied by the billing from the moment it is stored.

A change takes effect for what is billed after it: a job that spans it has its earlier GPU-seconds at the old price
and its later ones at the new (each report's tile, each billing interval, priced when it is billed).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from mfumon.api.context import AppContext
from mfumon.api.core.security import Principal
from mfumon.api.crud.prices import add_price_list, latest_price_list, price_lists
from mfumon.api.db.tables import PriceListRow
from mfumon.api.pricing import NO_PRICES, PriceList
from mfumon.api.schemas.prices import PricesHistory, PricesIn, PricesPublic

logger = logging.getLogger(__name__)


def read_prices_file(path: str | os.PathLike[str]) -> PricesIn:
    """A price list from a YAML (or JSON) file; ValueError naming the first problem."""
    text = Path(path).read_text()
    try:
        document = yaml.safe_load(text) if not str(path).endswith(".json") else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ValueError(f"not YAML or JSON: {exc}") from None
    try:
        return PricesIn.model_validate(document or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise ValueError(f"{where}: {first['msg']}") from None


def _price_list(row: PriceListRow | None) -> PriceList:
    if row is None:
        return NO_PRICES
    return PriceList.from_json(row.document, set_at=row.set_at, set_by=row.set_by)


def load_prices(ctx: AppContext) -> PriceList:
    """At start-up: store the file's price list when it differs from the one in effect, then hold the newest."""
    path = ctx.settings.PRICES_FILE
    with ctx.sessions.begin() as session:
        row = latest_price_list(session)
        if path is not None:
            document = read_prices_file(path).model_dump(mode="json")
            if row is None or row.document != document:
                row = add_price_list(session, document, set_by=f"file:{path}"[:136], now=ctx.clock())
                logger.info("prices: the list in %s takes effect now (it differs from the one stored)", path)
        ctx.state.prices = _price_list(row)
    return ctx.state.prices


def refresh_prices(ctx: AppContext) -> PriceList:
    """Hold the newest price list (another replica may have set it): one indexed row read."""
    with ctx.sessions() as session:
        row = latest_price_list(session)
        if row is not None and row.set_at != ctx.state.prices.set_at:
            ctx.state.prices = _price_list(row)
    return ctx.state.prices


def set_prices(ctx: AppContext, body: PricesIn, principal: Principal) -> PricesPublic:
    """Store ``body`` as the price list in effect from now; the previous ones stay in the history."""
    with ctx.sessions.begin() as session:
        row = add_price_list(
            session,
            body.model_dump(mode="json"),
            set_by=principal.name,
            now=ctx.clock(),
        )
        ctx.state.prices = _price_list(row)
    return public(ctx.state.prices)


def public(prices: PriceList) -> PricesPublic:
    return PricesPublic.model_validate({**prices.as_json(), "set_at": prices.set_at, "set_by": prices.set_by})


def read_prices(ctx: AppContext, *, history: int) -> PricesHistory:
    with ctx.sessions() as session:
        rows = price_lists(session, limit=history) if history else []
    return PricesHistory(current=public(ctx.state.prices), history=[public(_price_list(r)) for r in rows])
