"""Parameter counts in HTTP take the forms the CLI takes (issue 30 #5): ``"7B"``, ``"8.03e9"``, ``"125M"``."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import report


@pytest.mark.parametrize(("written", "count"), [("7B", 7e9), ("7e9", 7e9), ("7000000000", 7e9), ("7000M", 7e9)])
def test_a_report_takes_the_cli_forms(client: TestClient, written: str, count: float) -> None:
    as_number = client.post("/v1/jobs/number/reports", json=report(model={"params": count}))
    as_text = client.post("/v1/jobs/text/reports", json=report(model={"params": written}))
    assert as_text.status_code == 200, as_text.text
    assert as_text.json()["mfu"] == pytest.approx(as_number.json()["mfu"])
    assert as_text.json()["flops_per_token"] == pytest.approx(6 * count)


def test_registration_and_moe_take_them_too(client: TestClient) -> None:
    answer = client.put("/v1/jobs/moe", json={"model": {"params": "46.7B", "active_params": "12.9B"}})
    assert answer.status_code == 200, answer.text
    reported = client.post("/v1/jobs/moe/reports", json=report(model={"params": "46.7B", "active_params": "12.9B"}))
    assert reported.json()["flops_per_token"] == pytest.approx(6 * 12.9e9)


@pytest.mark.parametrize("written", ["7 B", "7b", "seven", "0", "0.0B", "1e31", "-7B", "7B7", "", "1e16T"])
def test_other_strings_are_a_422_naming_params_that_changes_nothing(client: TestClient, written: str) -> None:
    answer = client.post("/v1/jobs/bad-count/reports", json=report(model={"params": written}))
    assert answer.status_code == 422
    assert "params" in answer.text and "7B" in answer.text  # the error shows the forms that work
    assert client.get("/v1/jobs/bad-count").status_code == 404


def test_the_document_says_number_or_such_a_string(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ModelSpec"]["properties"]["params"]
    (given,) = [choice for choice in schema["anyOf"] if choice.get("anyOf")]
    assert {c["type"] for c in given["anyOf"]} == {"number", "string"}
