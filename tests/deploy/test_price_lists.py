"""The shipped price lists (issue 60): the operator's example, the one its documentation prints, and the demo's, which
the live tests' aggregators run with, are lists the aggregator takes, and the demo's leaves exactly one pool
unpriced so that the boards' unpriced panels have something to show."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from mfumon.api.pricing import PriceList
from mfumon.api.schemas.prices import PricesIn
from mfumon.api.services.prices import read_prices_file
from mfumon.exporter.demo.prices import DEMO_PRICES, UNPRICED_DEMO_POOL, write_demo_prices
from mfumon.exporter.demo.simcluster import default_cluster
from mfumon.mfu._mfu import default_peak_table
from tests.deploy._support import DEPLOY, REPO

EXAMPLE = DEPLOY / "prices.example.yml"
GUIDE = REPO / "docs" / "operators" / "cost-and-energy.md"


def test_the_example_is_a_price_list_and_the_guide_prints_it() -> None:
    example = read_prices_file(EXAMPLE)
    assert example.gpu_hour.default is not None and example.kwh is not None
    blocks = re.findall(r"^```yaml\n(.*?)^```", GUIDE.read_text(), re.S | re.M)
    assert EXAMPLE.read_text() in blocks
    # the guide's PUT sends the same list
    (body,) = re.findall(r"-d '(\{.*\})'", GUIDE.read_text())
    assert PricesIn.model_validate_json(body) == example


def test_the_demo_writes_its_list_as_the_aggregator_reads_it(tmp_path: Path) -> None:
    path = write_demo_prices(tmp_path)
    assert read_prices_file(path).model_dump(mode="json") == PricesIn.model_validate(DEMO_PRICES).model_dump(
        mode="json"
    )
    assert yaml.safe_load(path.read_text()) == DEMO_PRICES


def test_the_demo_prices_every_pool_but_one() -> None:
    prices = PriceList.from_json(PricesIn.model_validate(DEMO_PRICES).model_dump(mode="json"))
    table = default_peak_table()
    cluster = default_cluster()
    devices_by_pool: dict[str, set[str | None]] = {}
    for node in cluster.nodes:
        devices_by_pool.setdefault(node.pool, set()).add(table.lookup(node.gpu_model, "bf16").device_key)
    unpriced = {
        pool for pool, devices in devices_by_pool.items() if any(prices.gpu_hour([pool], d) is None for d in devices)
    }
    assert unpriced == {UNPRICED_DEMO_POOL}
    assert prices.kwh is not None and prices.pue > 1
