"""``/ui/chargeback`` (issue 60): the rows that add up to the fleet, a cost no price covers as "unpriced" (never 0
or blank), the fleet's cost by category, pools and jobs, the window and the sort taken from the query."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from mfumon.api.pages.fmt import money
from tests.utils.chargeback import bill_fleet


def _rows(page: str) -> dict[str, str]:
    """Each row of the rows table (its label) -> the row's HTML."""
    body = page[page.index('<table id="chargeback">') :]
    body = body[: body.index("</table>")]
    rows = re.findall(r'<tr class="row-(\w+)"><t[dh][^>]*>(.*?)</tr>', body, re.S)
    return {re.sub(r"<[^>]+>", "", cell.split("</t")[0]).strip(): cell for _, cell in rows}


def test_the_rows_add_up_to_the_fleet_and_an_unpriced_cost_says_so(client: TestClient) -> None:
    bill_fleet(client)  # pool train priced, pool free and energy not
    api = client.get("/v1/chargeback", params={"since": "30d"}).json()
    page = client.get("/ui/chargeback")
    assert page.status_code == 200, page.text
    rows = _rows(page.text)
    assert list(rows) == [
        "nlp",
        "vision",
        "jobs without a team",
        "idle capacity",
        "unreported busy GPUs",
        "fleet (the sum of the rows above)",
    ]
    by_label = {"nlp": api["rows"][0], "vision": api["rows"][1], "jobs without a team": api["rows"][2]}
    assert by_label["nlp"]["cost"] > 0 and by_label["vision"]["cost"] is None
    assert str(money(by_label["nlp"]["cost"], "EUR")) in rows["nlp"]
    for label in ("vision", "jobs without a team"):  # the free pool's GPU-hours, energy unpriced: no cost at all
        assert ">unpriced</span>" in rows[label] and "0.00 EUR" not in rows[label], label
    assert str(money(api["fleet"]["cost"], "EUR")) in rows["fleet (the sum of the rows above)"]
    assert api["fleet"]["cost"] == pytest.approx(sum(r["cost"] or 0.0 for r in api["rows"]))
    assert 'href="/ui/jobs?team=nlp"' in page.text
    # The jobs, costliest first, each linked to its page; the unpriced ones say so.
    jobs = re.findall(r'<tr><td class="name"><a class="clip" href="/ui/jobs/([\w.-]+)"', page.text)
    assert jobs == ["llama", "orphan", "vit"]
    vit = page.text[page.text.index('href="/ui/jobs/vit"') :]
    assert ">unpriced</span>" in vit[: vit.index("</tr>")]
    # The fleet's cost by category: compute, idle and unreported GPU-hours priced; energy drawn but not priced.
    categories = page.text[page.text.index('<table id="categories">') :]
    assert "idle GPU-hours" in categories and "no price per kWh" in categories
    assert 'id="chart-cost"' in page.text and 'href="/ui/chargeback"' in client.get("/ui").text


def test_the_window_and_the_sort_come_from_the_query(client: TestClient) -> None:
    bill_fleet(client, kwh=0.25)
    week = client.get("/ui/chargeback", params={"since": "7d", "sort": "jobs.job", "dir": "desc", "refresh": 0})
    assert week.status_code == 200, week.text
    assert "<strong>last 7d</strong>" in week.text and 'href="/v1/chargeback?since=7d"' in week.text
    assert re.findall(r'href="/ui/jobs/([\w.-]+)"', week.text) == ["vit", "orphan", "llama"]
    assert 'title="sort by Job (ascending)">Job</a> ▼' in week.text  # the links keep the window
    assert 'href="/ui/chargeback?since=24h&amp;sort=jobs.job&amp;dir=desc&amp;refresh=0"' in week.text
    assert "energy not priced" not in week.text and "0.25 EUR per kWh" in week.text
    for bad in ({"since": "1y"}, {"since": "24h", "until": "48h"}, {"range": "7d"}, {"sort": "jobs.nope"}):
        assert client.get("/ui/chargeback", params=bad).status_code == 422, bad


def test_without_a_price_list_every_cost_is_unpriced_and_the_page_says_how_to_set_one(client: TestClient) -> None:
    assert "Nothing was billed in this window" in client.get("/ui/chargeback").text
    bill_fleet(client, priced=False)
    page = client.get("/ui/chargeback").text
    assert 'id="no-prices"' in page and "PUT /v1/prices" in page and "MFUMON_PRICES_FILE" in page
    assert 'id="fleet-cost"><span class="unpriced"' in page
    rows = _rows(page)
    assert len(rows) == 6 and all(">unpriced</span>" in row for row in rows.values())
    assert "EUR" not in page and "USD" in page  # no amount anywhere; the currency a price list would default to


def test_a_job_page_shows_its_energy_and_cost_or_says_unpriced(client: TestClient) -> None:
    bill_fleet(client)  # pool train priced, pool free not
    for job_id, priced in (("llama", True), ("vit", False)):
        api = client.get(f"/v1/jobs/{job_id}").json()
        page = client.get(f"/ui/jobs/{job_id}").text
        section = page[page.index("<h2>Energy and cost</h2>") : page.index("<h2>Software</h2>")]
        assert api["energy_joules"] > 0 and f'title="{api["energy_joules"]:.6g} J"' in section
        if priced:
            assert str(money(api["cost"], "EUR")) in section and ">unpriced</span>" not in section
        else:
            assert api["cost"] is None and ">unpriced</span>" in section and "0.00 EUR" not in section
