"""``/ui/regressions``: the software changes of the fleet on a page, most serious first, with what each rests on."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.api.routes.test_regressions_api import upgrade_fleet


def test_the_page_lists_the_regression_first_then_the_harmless_change(client: TestClient) -> None:
    upgrade_fleet(client)
    page = client.get("/ui/regressions")
    assert page.status_code == 200, page.text
    rows = re.findall(r'<tr class="verdict-(\w+)">\s*<td>[^<]*</td>\s*<td><code>(\w+)</code>', page.text)
    assert rows == [("regression", "nccl"), ("no_change", "driver")]
    assert "<code>2.21.5</code> → <code>2.23.4</code>: -6.0 %" in page.text
    assert 'href="/ui/regressions"' in client.get("/ui").text  # in the header of every page


def test_an_empty_fleet_says_why_and_a_bad_range_is_a_422_page(client: TestClient) -> None:
    assert "no software changes in the window" in client.get("/ui/regressions").text
    assert client.get("/ui/regressions", params={"range": "1y"}).status_code == 422
