"""A serving job's page (kind ``inference``, issue 55): SLO goodput with its targets, latency percentiles, load, MBU
and MFU by phase, the serving waterfall and their charts, posted through the API with the engines' histograms; a
training job's page unchanged."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.pages import fmt
from tests.api.routes.test_serving_slo import TTFT_LE, histogram, report_with
from tests.utils.clock import Clock
from tests.utils.factories import report

SERVING_CATEGORIES = ["down", "idle", "prefill", "decode", "recompute", "busy"]
TRAINING_ONLY = ("Goodput (step time", 'id="waterfall"', "data_wait", "bubble", "checkpoint", "comm_exposed")
SERVING_CHARTS = (
    "chart-ttft",
    "chart-tpot",
    "chart-goodput",
    "chart-requests",
    "chart-queue",
    "chart-kv",
    "chart-preemptions",
    "chart-mfu",
    "chart-serving-waterfall",
)
# 1,000 tokens per 10 s report: 900 within 20 ms, 990 within 40 ms
ITL = histogram(TTFT_LE, {0.02: 900, 0.04: 990, 0.06: 1000}, 1000, 25.0)


def _card(page: str, card_id: str) -> str:
    found = re.search(rf'<div class="card" id="{card_id}">(.*?)</div>\s*</div>', page, re.S)
    assert found, card_id
    return found.group(1)


def _table(page: str, table_id: str) -> list[list[str]]:
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert found, table_id
    rows = re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)
    return [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S) for row in rows]


def _text(markup: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", markup)).strip()


def _before_diagnosis(page: str) -> str:
    """The page down to its findings (whose advice may name anything)."""
    return page[: page.index("<h2>Diagnosis</h2>")]


def _serve(client: TestClient, job_id: str, reports: int = 3, **overrides: Any) -> dict[str, Any]:
    clock = Clock(client)
    for _ in range(reports):
        body = report_with(**{"preemptions": 2, "prefill_tokens": 40_000, "itl_histogram": ITL, **overrides})
        answer = client.post(f"/v1/jobs/{job_id}/reports", json=body)
        assert answer.status_code == 200, answer.text
        clock.advance(10)
    return client.get(f"/v1/jobs/{job_id}").json()


def test_a_serving_job_page_shows_goodput_latency_load_and_the_serving_waterfall(client: TestClient) -> None:
    assert client.put("/v1/jobs/chat", json={"kind": "inference", "slo": {"tpot_seconds": 0.12}}).status_code == 200
    job = _serve(client, "chat")
    serving = job["serving"]
    page = client.get("/ui/jobs/chat")
    assert page.status_code == 200, page.text
    text = page.text

    # SLO goodput over the window: TTFT 95 of 100 within 1 s (an edge); TPOT within 0.12 s between 90 and 96 (the
    # target lies in the (0.1, 0.15] bucket); both: at least 0.95 + 0.90 - 1 = 85 %, at most min(0.95, 0.96) = 95 %
    goodput = _card(text, "serving-goodput")
    assert 'at least</small> <span class="ratio" title="0.8500">85.0 %</span>' in goodput
    assert 'at most</small> <span class="ratio" title="0.9500">95.0 %</span>' in goodput
    assert serving["slo_goodput"]["ratio"] == pytest.approx(0.85) and job["slo_goodput_ratio"] == pytest.approx(0.85)
    words = _text(goodput)
    assert "TTFT ≤ 1 s (default)" in words and "TPOT ≤ 120 ms (job)" in words
    assert "objective ≥ 90.0 % (default)" in words
    assert "8.5 requests/s met both" in words  # 0.85 x 300 requests / 30 s
    assert "last 30 s" in words  # three 10 s reports: the window so far

    # The newest interval's percentiles, interpolated in their bucket: TTFT p90 = 0.75 + 30/35 x 0.25 s
    assert _text(_card(text, "serving-ttft")).startswith(
        "TTFT (time to first token): p50 / p90 / p99 (newest interval) 458 ms / 964 ms / 2.2 s"
    )
    assert serving["latency"]["ttft_p90"] == pytest.approx(0.75 + 30 / 35 * 0.25)
    assert "within it over the window: 95.0 %" in _text(_card(text, "serving-ttft"))
    tpot = _text(_card(text, "serving-tpot"))
    assert "80 ms / 100 ms / 275 ms" in tpot and "target TPOT ≤ 120 ms (job)" in tpot
    assert "between 90.0 % and 96.0 %" in tpot
    for key in ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99"):
        assert str(fmt.latency(serving["latency"][key])) in text, key
    latency = {_text(row[0]): [_text(cell) for cell in row[1:]] for row in _table(text, "latency")[1:]}
    assert latency["TTFT (time to first token)"] == ["458 ms", "964 ms", "2.2 s", "≤ 1 s (default)", "95.0 %"]
    assert latency["TPOT (time per output token, per request)"][1] == "100 ms"
    assert latency["ITL (inter-token latency, per token)"][:3] == ["15.6 ms", "20 ms", "40 ms"]

    # Load and pressure over the window; MBU and the phases' MFU of the newest report, as the API has them
    assert _text(_card(text, "serving-rate")).endswith("10 requests/s")  # 300 requests in 30 s
    assert _text(_card(text, "serving-preemptions")).endswith("0.2 /s 6 in all")
    assert _text(_card(text, "serving-queue")).endswith("32 running / 3 waiting")
    assert _text(_card(text, "serving-kv")).endswith("41.0 % max 41.0 %")
    assert _text(_card(text, "serving-batch")).endswith("32 sequences")
    assert _text(_card(text, "serving-engine")).endswith("vllm")
    phases = job["latest"]["inference"]["phases"]
    phase_mfu = _card(text, "serving-phase-mfu")
    assert (
        str(fmt.ratio(phases["prefill"]["mfu"])) in phase_mfu and str(fmt.ratio(phases["decode"]["mfu"])) in phase_mfu
    )
    assert _text(_card(text, "serving-mbu")).endswith("37.7 %")  # the README's worked example
    assert job["latest"]["mbu"] == pytest.approx(0.3766, abs=1e-4)

    # The serving waterfall, row by row as the API has it: 8 GPUs x 30 s, none of it down or idle
    rows = _table(text, "serving-waterfall")
    assert [_text(r[0]) for r in rows[1:-1]] == SERVING_CATEGORIES
    api = {e["category"]: e["gpu_seconds"] for e in job["serving_waterfall"]}
    for row in rows[1:-1]:
        category = _text(row[0])
        assert row[1] == str(fmt.gpu_hours(api[category])), category
        assert row[2] == str(fmt.ratio(api[category] / 240.0)), category
    assert _text(rows[-1][1]) == "240 GPU-s" and job["total_gpu_seconds"] == pytest.approx(240.0)
    assert api["decode"] > api["prefill"] > api["recompute"] > 0 and api["down"] == api["idle"] == 0
    assert "Method: down: start-up, failures and silences" in text

    # Charts from the history rows, the targets as dashed lines, the goodput as a band between its bounds
    for chart_id in SERVING_CHARTS:
        assert f'id="{chart_id}"' in text, chart_id
    ttft_chart = text[text.index('id="chart-ttft"') : text.index("</svg>", text.index('id="chart-ttft"'))]
    assert 'class="ref target"' in ttft_chart and "TTFT target 1 s (default)" in ttft_chart
    assert ttft_chart.count('class="line ') == 2
    good_chart = text[text.index('id="chart-goodput"') : text.index("</svg>", text.index('id="chart-goodput"'))]
    assert 'class="band s0"' in good_chart and "objective 90 % (default)" in good_chart
    mfu_chart = text[text.index('id="chart-mfu"') : text.index("</svg>", text.index('id="chart-mfu"'))]
    assert "prefill MFU" in mfu_chart and "decode MFU" in mfu_chart and "MBU (memory bandwidth)" in mfu_chart

    # Nothing of a training job's page
    head = _before_diagnosis(text)
    for training in TRAINING_ONLY:
        assert training not in head, training
    assert "— (not computed for this report)" not in text and "<h2>Stragglers</h2>" not in text


def test_a_training_job_page_keeps_its_training_figures(client: TestClient) -> None:
    body = report(step_seconds=2.0, comm_seconds=0.4, data_wait_seconds=0.2, bubble_seconds=0.1, interval_seconds=30)
    body["tokens"] = 750_000
    del body["tokens_per_second"]
    assert client.post("/v1/jobs/train-1/reports", json=body).status_code == 200
    text = client.get("/ui/jobs/train-1").text
    assert "Goodput (step time ÷ allocated)" in text and 'id="chart-waterfall"' in text
    categories = [_text(r[0]) for r in _table(text, "waterfall")[1:-1]]
    assert {"init", "checkpoint", "eval", "data_wait", "bubble", "comm_exposed", "compute"} <= set(categories)
    for serving_only in ("serving-goodput", "chart-ttft", "serving-waterfall", "SLO goodput", "MFU and MBU"):
        assert serving_only not in text, serving_only
    assert "<h2>Stragglers</h2>" in text


def test_without_a_ttft_histogram_goodput_is_the_engines_reason_never_a_bare_dash(client: TestClient) -> None:
    job = _serve(client, "tgi-1", engine="tgi", ttft_histogram=None, itl_histogram=None, preemptions=None)
    reason = job["serving"]["slo_goodput"]["reason"]
    assert job["slo_goodput_ratio"] is None and reason.startswith("TGI exports no time-to-first-token histogram")
    text = client.get("/ui/jobs/tgi-1").text
    goodput = _card(text, "serving-goodput")
    assert f"— <small>({reason})</small>" in goodput and "%" not in goodput.split('<div class="k">targets')[0]
    assert "TTFT ≤ 1 s (default) and TPOT ≤ 100 ms (default)" in _text(goodput)
    assert f"— <small>({reason})</small>" in _card(text, "serving-ttft")
    assert "80 ms / 100 ms / 275 ms" in _text(_card(text, "serving-tpot"))  # TPOT still shown
    assert "TGI exports no preemption counter" in _card(text, "serving-preemptions")
    assert 'id="chart-goodput"' not in text and 'id="chart-ttft"' not in text
    assert "no report in the job&#39;s history carried an SLO goodput" in text
    assert 'id="chart-tpot"' in text and 'id="chart-kv"' in text
    assert not re.search(r'<span class="unknown">—</span>', _before_diagnosis(text))  # every dash says why


def test_a_serving_job_before_its_first_report_shows_its_pools_targets(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(SLO_POOLS={"chat": {"ttft_seconds": 0.5}})
    assert (
        client.put("/v1/jobs/new", json={"kind": "inference", "pool": "chat", "gpus_requested": 8}).status_code == 200
    )
    text = client.get("/ui/jobs/new").text
    goodput = _text(_card(text, "serving-goodput"))
    assert "— (no report yet)" in goodput and "TTFT ≤ 500 ms (pool) and TPOT ≤ 100 ms (default)" in goodput
    assert "no allocated GPU-time billed yet" in text and "Method: down:" in text
    assert _text(text).count("— (no report yet)") >= 20  # each figure and chart, with the reason
    assert not re.search(r'<span class="unknown">—</span>', _before_diagnosis(text))


def test_an_inference_report_without_phases_says_what_the_serving_figures_need(client: TestClient) -> None:
    assert client.post("/v1/jobs/flat/reports", json=report(kind="inference")).status_code == 200
    text = client.get("/ui/jobs/flat").text
    assert "— (no prefill/decode split in the newest report)" in _text(_card(text, "serving-goodput"))
    notice = re.search(r'<p class="notice" id="serving-reason">(.*?)</p>', text, re.S)
    assert notice and "did not split its tokens into prefill and decode" in notice.group(1)
    assert text.count("did not split its tokens") == 1  # the whole story once, the short reason on each figure
    assert 'id="chart-mfu"' in text and "Goodput (step time" not in text
