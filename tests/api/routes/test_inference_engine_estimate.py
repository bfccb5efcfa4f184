"""The serving engine's own MFU estimate beside ours: report -> JSON, /metrics and diagnosis, on both databases."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.routes.test_inference import serving_report
from tests.utils.factories import metric_value, scrape

H100_SXM_BF16 = 989e12  # the peak table's dense bf16 FLOP/s of one H100 SXM (ours uses the same)
H100_SXM_BANDWIDTH = 3.35e12
OURS_MFU = 2_000 * 145_368_709_120 / 7.912e15  # the README's worked example: 3.67 %


def test_the_engine_estimate_shows_beside_ours(client: TestClient) -> None:
    # 10 s on 8 H100: the engine says one GPU did 0.04 x peak x 10 s of FLOPs and moved 0.3 x bandwidth x 10 s.
    report = serving_report(
        engine_flops_per_gpu=0.04 * H100_SXM_BF16 * 10,
        engine_bytes_per_gpu=0.3 * H100_SXM_BANDWIDTH * 10,
        engine_estimator="vllm",
    )
    response = client.post("/v1/jobs/chat-70b/reports", json=report)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["mfu"] == pytest.approx(OURS_MFU)
    assert body["engine_mfu"] == pytest.approx(0.04)
    inference = body["inference"]
    assert inference["engine_flops_per_second"] == pytest.approx(0.04 * H100_SXM_BF16 * 8)
    assert inference["engine_mbu"] == pytest.approx(0.3)
    assert inference["engine_estimator"] == "vllm"

    latest = client.get("/v1/jobs/chat-70b").json()["latest"]
    assert latest["engine_mfu"] == pytest.approx(0.04) and latest["engine_mbu"] == pytest.approx(0.3)
    assert latest["mfu"] == pytest.approx(OURS_MFU)

    text = scrape(client)
    labels = {"job_id": "chat-70b", "kind": "inference"}
    assert metric_value(text, "mfumon_job_engine_mfu_ratio", **labels) == pytest.approx(0.04)
    assert metric_value(text, "mfumon_job_mfu_ratio", **labels) == pytest.approx(OURS_MFU)

    # ours / theirs = 0.0367 / 0.04 = 0.92: within the conventions' spread
    causes = [f["cause"] for f in client.get("/v1/jobs/chat-70b/diagnosis").json()["findings"]]
    assert "engine_mfu_disagrees" not in causes


def test_a_disagreement_becomes_a_finding_with_both_figures(client: TestClient) -> None:
    report = serving_report(engine_flops_per_gpu=0.02 * H100_SXM_BF16 * 10, engine_estimator="sglang")
    client.post("/v1/jobs/chat-sg/reports", json=report)
    findings = client.get("/v1/jobs/chat-sg/diagnosis").json()["findings"]
    found = [f for f in findings if f["cause"] == "engine_mfu_disagrees"]
    assert len(found) == 1
    evidence = found[0]["evidence"]
    assert evidence["ratio"] == pytest.approx(OURS_MFU / 0.02, abs=1e-4)  # ours 3.67 % vs theirs 2 %
    assert evidence["ours_mfu"] == pytest.approx(OURS_MFU, abs=1e-4) and evidence["engine_mfu"] == 0.02
    assert evidence["engine"] == "sglang" and evidence["engine_convention"].startswith("SGLang:")
    assert "4 x layers x heads x head_dim" in evidence["ours_convention"]  # the 70B shape gives the attention term


def test_without_the_engine_estimate_nothing_is_shown(client: TestClient) -> None:
    body = client.post("/v1/jobs/plain/reports", json=serving_report()).json()
    assert body["engine_mfu"] is None and body["inference"]["engine_flops_per_second"] is None
    assert "mfumon_job_engine_mfu_ratio{" not in scrape(client)


def test_without_a_gpu_count_the_engine_figures_are_unknown_too(client: TestClient) -> None:
    report = serving_report(num_gpus=None, engine_flops_per_gpu=4e15, engine_bytes_per_gpu=1e13)
    body = client.post("/v1/jobs/nogpu/reports", json=report).json()
    inference = body["inference"]
    assert body["engine_mfu"] is None
    assert inference["engine_flops_per_second"] is None and inference["engine_mbu"] is None


def test_engine_figures_need_the_phase_split(client: TestClient) -> None:
    body = {"kind": "inference", "model": {"params": 7e9}, "num_gpus": 1, "tokens_per_second": 100.0}
    response = client.post("/v1/jobs/rate-only/reports", json={**body, "engine_flops_per_gpu": 1e12})
    assert response.status_code == 422
    response = client.post("/v1/jobs/rate-only/reports", json={**serving_report(), "engine_estimator": "tgi"})
    assert response.status_code == 422  # TGI exports no estimate
