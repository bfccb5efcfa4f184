"""``mfumon report`` on serving jobs (issue 55): each serving job's SLO goodput as the aggregator bounds it, its
targets, and the share of its GPU-hours idle or down, in both renderings; training jobs get no serving line."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.exporter.links import job_page_url
from mfumon.exporter.ops.html import render_html
from mfumon.exporter.ops.markdown import render_markdown
from mfumon.exporter.ops.report import fetch_report
from tests.api.routes.test_serving_slo import TPOT_LE, histogram, report_with
from tests.utils.clock import Clock
from tests.utils.factories import report

T0 = 1_800_000_000.0


def _serve(client: TestClient, clock: Clock, job_id: str, n: int, **overrides: Any) -> None:
    for _ in range(n):
        clock.advance(10)
        assert client.post(f"/v1/jobs/{job_id}/reports", json=report_with(**overrides)).status_code == 200


def test_serving_jobs_are_listed_with_their_goodput(client: TestClient) -> None:
    clock = Clock(client, start=T0)
    _serve(client, clock, "chat", 3, team="assistants")  # 85% to 90% met both (test_serving_slo)
    slow = histogram(TPOT_LE, {0.05: 10, 0.1: 50, 0.2: 100}, 100, 12.0)  # half within 0.1 s
    _serve(client, clock, "slow-chat", 3, team="assistants", tpot_histogram=slow)
    tgi = {"engine": "tgi", "ttft_histogram": None}
    _serve(client, clock, "tgi-chat", 2, **tgi)
    clock.advance(10)
    assert client.post("/v1/jobs/train/reports", json=report()).status_code == 200

    result = fetch_report(client, since="1d", generated_at=clock.now)
    lines = {line.job_id: line for line in result.serving}
    assert set(lines) == {"chat", "slow-chat", "tgi-chat"}
    assert [line.job_id for line in result.serving] == ["slow-chat", "chat", "tgi-chat"]  # furthest below first
    assert lines["chat"].goodput == pytest.approx(0.85) and lines["chat"].goodput_upper == pytest.approx(0.9)
    assert lines["slow-chat"].goodput == pytest.approx(0.45) and lines["slow-chat"].goodput_upper == 0.5
    assert lines["slow-chat"].below_objective
    assert not lines["chat"].below_objective  # 90% could be met: not certainly below 0.9
    assert lines["tgi-chat"].goodput is None and "time-to-first-token" in (lines["tgi-chat"].reason or "")
    chat = lines["chat"]
    assert abs(chat.gpu_hours - sum(h for _, h in chat.waterfall)) < 1e-9
    jobs = {j["job_id"]: j for j in client.get("/v1/jobs").json()["data"]}
    assert abs(chat.gpu_hours * 3600 - jobs["chat"]["total_gpu_seconds"]) < 1e-6  # sums to the allocation

    markdown = render_markdown(result)
    assert "## Serving jobs" in markdown
    # 95% within TTFT, 50% within TPOT: at least 45% met both, at most 50%
    slow_chat = job_page_url(result.url, "slow-chat")
    assert (
        f"| [`slow-chat`]({slow_chat}) | assistants | vllm | 10.00 | 45.0% to 50.0% | 1 s / 0.1 s | 90.0% | yes |"
        in markdown
    )
    assert "| 85.0% to 90.0% | 1 s / 0.1 s | 90.0% |" in markdown
    assert "TGI exports no time-to-first-token histogram" in markdown
    html = render_html(result)
    assert "<h2>Serving jobs</h2>" in html and f'<a href="{slow_chat}"><code>slow-chat</code></a>' in html
    assert "85.0% to 90.0%" in html
