"""``mfumon report --chargeback`` (issue 60) against a real aggregator with a billed half hour: the CSV's rows add up
to its fleet line, a cost no price covers is an empty cell (never 0), JSON is the API's answer, and a window the
aggregator would refuse is one line and exit 2 before any request."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mfumon.api.services.usage import TIME_PATTERN
from mfumon.exporter.ops import chargeback, cli
from tests.utils.chargeback import PRICE_PER_GPU_HOUR, bill_fleet

URL = "http://aggregator.test:8000"
NOT_JOBS = ("team", "no_team", "idle", "unreported")


@pytest.fixture
def calls(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    """The CLI's requests go to the test aggregator (its HTTP client is the app's); the (url, token) it used."""
    seen: list[tuple[str, str | None]] = []

    def connect(url: str, token: str | None, timeout: float) -> contextlib.AbstractContextManager[httpx.Client]:
        seen.append((url, token))
        return contextlib.nullcontext(client)

    monkeypatch.setattr(cli, "_client", connect)
    return seen


def _csv(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, str]]:
    assert cli.main(["--url", URL, "--chargeback", "--since", "24h", "--format", "csv", *argv]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ",".join(chargeback.CSV_COLUMNS)
    return list(csv.DictReader(io.StringIO(out)))


def _sum(lines: list[dict[str, str]], column: str) -> float:
    return sum(float(line[column] or 0.0) for line in lines)


@pytest.mark.parametrize("kwh", [0.25, None])
def test_the_csv_rows_add_up_to_the_fleet_and_unpriced_costs_are_empty(
    client: TestClient, calls: list[Any], capsys: pytest.CaptureFixture[str], kwh: float | None
) -> None:
    bill_fleet(client, kwh=kwh)
    lines = _csv(capsys, "--token", "reader-token")
    assert calls == [(URL, "reader-token")]
    api = client.get("/v1/chargeback", params={"since": "24h"}).json()
    kinds = [line["row"] for line in lines]
    assert kinds == ["team", "team", "no_team", "idle", "unreported", "job", "job", "job", "fleet"]
    rows, jobs, fleet = lines[:5], lines[5:8], lines[-1]
    assert [r["name"] for r in rows[:2]] == ["nlp", "vision"] and {line["currency"] for line in lines} == {"EUR"}
    assert float(fleet["gpu_hours"]) == pytest.approx(8.0)  # 16 GPUs for half an hour
    for column in ("gpu_hours", "cost", "unpriced_gpu_hours", "energy_kwh"):
        assert _sum(rows, column) == pytest.approx(float(fleet[column]), abs=1e-5), column
    assert float(fleet["cost"]) == pytest.approx(api["fleet"]["cost"], abs=1e-6)
    # Pool train (8 GPUs) is priced, its idle and unreported GPUs too; pool free is not.
    gpu_hour_cost = 8 * 0.5 * PRICE_PER_GPU_HOUR
    energy_cost = float(fleet["energy_kwh"]) * kwh if kwh else 0.0
    assert float(fleet["cost"]) == pytest.approx(gpu_hour_cost + energy_cost, rel=1e-4)
    assert float(fleet["unpriced_gpu_hours"]) == pytest.approx(4.0)
    by_job = {j["name"]: j for j in jobs}
    assert by_job["llama"]["team"] == "nlp" and by_job["orphan"]["team"] == ""
    for job_id in ("vit", "orphan"):  # on the unpriced pool: an empty cell, never 0; its energy alone where priced
        if kwh is None:
            assert by_job[job_id]["cost"] == "" and by_job[job_id]["cost_per_million_tokens"] == ""
        else:
            assert float(by_job[job_id]["cost"]) == pytest.approx(float(by_job[job_id]["energy_kwh"]) * kwh, rel=1e-4)
        assert float(by_job[job_id]["unpriced_gpu_hours"]) == pytest.approx(2.0)
    assert float(by_job["llama"]["cost"]) > 0 and float(by_job["llama"]["tokens"]) == pytest.approx(45e6)
    idle = rows[3]
    assert idle["tokens"] == "" and idle["joules_per_token"] == ""
    if kwh is None:  # nothing of the free pool's teams is priced: no cost at all
        assert rows[1]["cost"] == "" and rows[2]["cost"] == ""
    else:  # their energy is
        assert float(rows[1]["cost"]) == pytest.approx(float(rows[1]["energy_kwh"]) * kwh, rel=1e-4)


def test_json_is_the_apis_answer_and_markdown_a_short_table(
    client: TestClient, calls: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    bill_fleet(client)
    assert cli.main(["--url", URL, "--chargeback", "--since", "24h", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == client.get("/v1/chargeback", params={"since": "24h"}).json()
    assert cli.main(["--url", URL, "--chargeback"]) == 0  # markdown, 30 days
    out = capsys.readouterr().out
    assert out.startswith("# Chargeback: ") and "| **fleet** | 8.00 | 8.00 EUR | 4.00 |" in out
    assert "| vision | 2.00 | unpriced | 2.00 |" in out and "3 job(s) in the window" in out


def test_a_window_the_aggregator_would_refuse_is_one_line_and_exit_2(
    calls: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["--since", "1y"], ["--since", "yesterday"], ["--until", "soon"]):
        assert cli.main(["--url", URL, "--chargeback", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"mfumon report: {argv[0]} ") and "30d" in err
    assert calls == []  # refused before any request
    for argv in (["--format", "html"], ["--price", "default=2"], ["--url", URL]):
        with pytest.raises(SystemExit) as exc:
            cli.main(["--url", URL, "--chargeback", *argv])
        assert exc.value.code == 2, argv
    for argv in (["--format", "csv"], ["--format", "json"], ["--until", "1h"]):  # the report's own: markdown, html
        with pytest.raises(SystemExit) as exc:
            cli.main(["--url", URL, *argv])
        assert exc.value.code == 2, argv
    assert chargeback.TIME_PATTERN == TIME_PATTERN  # the aggregator's rule, copied (the report cannot import it)


def test_an_aggregator_without_the_chargeback_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = httpx.Client(base_url=URL, transport=httpx.MockTransport(lambda request: httpx.Response(404)))
    monkeypatch.setattr(cli, "_client", lambda url, token, timeout: older)
    assert cli.main(["--url", URL, "--chargeback", "--format", "csv"]) == 1
    assert "older than the chargeback" in capsys.readouterr().err
