"""Inference reports split by phase: MBU and MFU by phase in the JSON API and on /metrics, on both databases."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import metric_value, node_sample, scrape

LLAMA_70B = {"name": "llama3-70b", "params": 70e9, "layers": 80, "heads": 64, "kv_heads": 8, "head_dim": 128}


def serving_report(**overrides: Any) -> dict[str, Any]:
    """The README's worked example: 70B bf16 on 8 x H100 SXM, batch 32, 2k context, 2,000 decode tokens/s."""
    body: dict[str, Any] = {
        "kind": "inference",
        "num_gpus": 8,
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "model": dict(LLAMA_70B),
        "interval_seconds": 10,
        "prefill_tokens": 0,
        "decode_tokens": 20_000,
        "batch_size": 32,
        "context_tokens": 2048,
        "requests_running": 32,
        "requests_waiting": 3,
        "kv_cache_usage": 0.41,
    }
    body.update(overrides)
    return body


def test_worked_example_through_the_api(client: TestClient) -> None:
    response = client.post("/v1/jobs/chat-70b/reports", json=serving_report())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["mbu"] == pytest.approx(10_092_177_280_000 / 26.8e12)  # README: 37.7 %
    assert body["mfu"] == pytest.approx(2_000 * 145_368_709_120 / 7.912e15)  # README: 3.67 %
    assert body["tokens_per_second"] == 2_000
    inference = body["inference"]
    assert inference["decode_step_bytes"] == {
        "weights": 140e9,
        "kv_cache": 21_474_836_480,
        "total": 161_474_836_480,
    }
    assert inference["kv_cache_bytes_per_token"] == 327_680
    assert inference["formulas"]["mbu"].startswith("decode_step_bytes")
    assert inference["symbols"]["H_kv"] == 8 and inference["symbols"]["b_w"] == 2
    assert inference["phases"]["decode"]["flops_per_token"] == 145_368_709_120
    assert "h100" in inference["bandwidth_source"].lower()

    text = scrape(client)
    labels = {"job_id": "chat-70b", "kind": "inference"}
    assert metric_value(text, "mfumon_job_mbu_ratio", **labels) == pytest.approx(body["mbu"])
    assert metric_value(text, "mfumon_job_phase_mfu_ratio", phase="decode", **labels) == pytest.approx(body["mfu"])
    assert metric_value(text, "mfumon_job_phase_mfu_ratio", phase="prefill", **labels) == 0
    assert metric_value(text, "mfumon_job_phase_tokens_per_second", phase="decode", **labels) == 2_000
    assert metric_value(text, "mfumon_job_decode_step_bytes", part="kv_cache", **labels) == 21_474_836_480
    assert metric_value(text, "mfumon_job_decode_step_bytes", part="weights", **labels) == 140e9
    assert metric_value(text, "mfumon_job_peak_memory_bytes_per_second", **labels) == pytest.approx(26.8e12)
    assert metric_value(text, "mfumon_job_batch_size", **labels) == 32
    assert metric_value(text, "mfumon_job_context_tokens", **labels) == 2048
    assert metric_value(text, "mfumon_job_requests_waiting", **labels) == 3
    assert metric_value(text, "mfumon_job_kv_cache_usage_ratio", **labels) == pytest.approx(0.41)
    assert metric_value(text, "mfumon_job_mfu_ratio", **labels) == pytest.approx(body["mfu"])


def test_training_jobs_and_unsplit_reports_have_no_inference_series(client: TestClient) -> None:
    legacy = serving_report(tokens_per_second=3000)
    for key in ("interval_seconds", "prefill_tokens", "decode_tokens"):
        del legacy[key]
    assert client.post("/v1/jobs/legacy/reports", json=legacy).json()["mbu"] is None
    text = scrape(client)
    assert metric_value(text, "mfumon_job_mbu_ratio", job_id="legacy") is None
    assert metric_value(text, "mfumon_job_phase_mfu_ratio", job_id="legacy", phase="decode") is None
    assert metric_value(text, "mfumon_job_requests_waiting", job_id="legacy") == 3  # the engine state still shows


def test_history_keeps_mbu_and_phases(client: TestClient) -> None:
    client.post("/v1/jobs/chat/reports", json=serving_report(prefill_tokens=40_000, mean_prompt_tokens=1500))
    history = client.get("/v1/jobs/chat").json()["history"]
    assert history[-1]["mbu"] == pytest.approx(10_092_177_280_000 / 26.8e12)
    assert history[-1]["prefill_tokens_per_second"] == 4_000
    assert history[-1]["decode_tokens_per_second"] == 2_000
    assert history[-1]["prefill_mfu"] == pytest.approx(4_000 * 143_932_160_000 / 7.912e15)


def test_concurrency_alias_and_running_requests_as_batch(client: TestClient) -> None:
    by_alias = serving_report(concurrency=32)
    del by_alias["batch_size"]
    assert client.post("/v1/jobs/a/reports", json=by_alias).json()["inference"]["batch_size"] == 32
    from_running = serving_report()
    del from_running["batch_size"]
    assert client.post("/v1/jobs/b/reports", json=from_running).json()["inference"]["batch_size"] == 32


def test_serving_dtypes_are_remembered_and_change_the_bytes(client: TestClient) -> None:
    first = client.post("/v1/jobs/q/reports", json=serving_report(weight_dtype="int4", kv_cache_dtype="fp8")).json()
    assert first["inference"]["decode_step_bytes"]["weights"] == 35e9  # 70e9 x 0.5
    assert first["inference"]["kv_cache_bytes_per_token"] == 163_840  # 2 x 80 x 8 x 128 x 1
    again = client.post("/v1/jobs/q/reports", json={k: v for k, v in serving_report().items() if k != "model"})
    assert again.json()["inference"]["weight_dtype"] == "int4"
    assert client.get("/v1/jobs/q").json()["kv_cache_dtype"] == "fp8"


def test_mbu_without_gpu_count_is_unknown_with_a_reason(client: TestClient) -> None:
    body = client.post("/v1/jobs/nogpu/reports", json=serving_report(num_gpus=None)).json()
    assert body["mbu"] is None and body["mfu"] is None
    assert "num_gpus" in body["inference"]["mbu_reason"]


def test_exporter_attribution_supplies_the_gpus(client: TestClient) -> None:
    client.post("/v1/nodes/n1/samples", json=node_sample(8, job_id="attributed"))
    body = serving_report()
    del body["num_gpus"], body["gpu_model"]
    result = client.post("/v1/jobs/attributed/reports", json=body).json()
    assert result["mbu"] == pytest.approx(10_092_177_280_000 / 26.8e12)


BAD_INFERENCE: list[tuple[str, dict[str, Any], str]] = [
    ("phases without interval", serving_report(interval_seconds=None), "interval_seconds"),
    ("phases with a rate", serving_report(tokens_per_second=10), "tokens_per_second"),
    ("tokens disagree", serving_report(tokens=5), "tokens"),
    ("negative decode", serving_report(decode_tokens=-1), "decode_tokens"),
    ("zero batch", serving_report(batch_size=0), "batch_size"),
    ("batch twice", serving_report(concurrency=8), "concurrency"),
    ("usage above one", serving_report(kv_cache_usage=1.5), "kv_cache_usage"),
    ("unknown weight dtype", serving_report(weight_dtype="int3"), "weight_dtype"),
    ("kv heads above heads", serving_report(model={**LLAMA_70B, "kv_heads": 128}), "kv_heads"),
    ("negative bandwidth", serving_report(peak_memory_bandwidth_per_gpu=-1), "peak_memory_bandwidth_per_gpu"),
    ("training with phases", serving_report(kind="training"), "prefill_tokens"),
]


@pytest.mark.parametrize(("case", "body", "field"), BAD_INFERENCE, ids=[c[0] for c in BAD_INFERENCE])
def test_bad_inference_report_is_rejected_and_changes_nothing(
    client: TestClient, case: str, body: dict[str, Any], field: str
) -> None:
    body = {k: v for k, v in body.items() if v is not None}
    before = client.get("/v1/jobs").json()
    response = client.post("/v1/jobs/bad/reports", json=body)
    assert 400 <= response.status_code < 500, response.text
    assert field in response.text
    assert client.get("/v1/jobs").json() == before
    assert 'job_id="bad"' not in scrape(client)


def test_concurrent_first_reports_to_new_inference_jobs(client: TestClient) -> None:
    jobs = [f"serve-{i % 4}" for i in range(24)]  # four new ids, six writers each, all at once

    def post(job_id: str) -> int:
        return client.post(f"/v1/jobs/{job_id}/reports", json=serving_report()).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(post, jobs))
    assert statuses == [200] * len(jobs)
    for i in range(4):
        job = client.get(f"/v1/jobs/serve-{i}").json()
        assert job["reports_received"] == 6
        assert job["latest"]["mbu"] == pytest.approx(10_092_177_280_000 / 26.8e12)
