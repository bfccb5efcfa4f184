"""Every bad input gets a clear 4xx naming the field, and changes nothing."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import gpu, node_sample, report, scrape

BAD_REPORTS: list[tuple[str, dict[str, Any], str]] = [
    ("string rate", report(tokens_per_second="fast"), "tokens_per_second"),
    ("negative rate", report(tokens_per_second=-5), "tokens_per_second"),
    ("zero rate", report(tokens_per_second=0), "tokens_per_second"),
    ("infinite rate", report(tokens_per_second=math.inf), "tokens_per_second"),
    ("nan rate", report(tokens_per_second=math.nan), "tokens_per_second"),
    (
        "negative tokens",
        {**report(), "tokens_per_second": None, "tokens": -1, "interval_seconds": 5},
        "tokens",
    ),
    (
        "zero interval",
        {**report(), "tokens_per_second": None, "tokens": 10, "interval_seconds": 0},
        "interval_seconds",
    ),
    ("no throughput", {k: v for k, v in report().items() if k != "tokens_per_second"}, "tokens_per_second"),
    ("both throughputs", {**report(), "tokens": 10, "interval_seconds": 1}, "tokens_per_second"),
    ("unknown dtype", report(dtype="int4"), "dtype"),
    ("unknown kind", report(kind="finetune"), "kind"),
    ("zero gpus", report(num_gpus=0), "num_gpus"),
    ("fractional gpus", report(num_gpus=1.5), "num_gpus"),
    ("no params nor flops", report(model={"layers": 32}), "model"),
    ("negative params", report(model={"params": -7e9}), "params"),
    ("active above total", report(model={"params": 7e9, "active_params": 8e9}), "model"),
    ("negative comm", report(comm_seconds=-1, step_seconds=1), "comm_seconds"),
    ("negative peak", report(peak_flops_per_gpu=-1), "peak_flops_per_gpu"),
    ("typo field", report(tokens_per_sec=5), "tokens_per_sec"),
    ("long team", report(team="t" * 500), "team"),
    ("model not object", report(model=7e9), "model"),
]


@pytest.mark.parametrize(("case", "body", "field"), BAD_REPORTS, ids=[c[0] for c in BAD_REPORTS])
def test_bad_report_is_rejected_and_changes_nothing(
    client: TestClient, case: str, body: dict[str, Any], field: str
) -> None:
    body = {k: v for k, v in body.items() if v is not None}
    before = client.get("/v1/jobs").json()
    response = (
        client.post("/v1/jobs/job-1/reports", json=body)
        if "nan" not in case and "infinite" not in case
        else client.post(
            "/v1/jobs/job-1/reports",
            content=_json_with_non_finite(body),
            headers={"content-type": "application/json"},
        )
    )
    assert 400 <= response.status_code < 500, response.text
    assert field in response.text
    assert client.get("/v1/jobs").json() == before
    assert 'job_id="job-1"' not in scrape(client)


def _json_with_non_finite(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body, allow_nan=True)  # NaN / Infinity literals, as a careless client would send


def test_report_without_any_model_is_rejected(client: TestClient) -> None:
    body = report()
    del body["model"]
    response = client.post("/v1/jobs/nomodel/reports", json=body)
    assert response.status_code == 422 and "model" in response.text
    assert client.get("/v1/jobs/nomodel").status_code == 404


@pytest.mark.parametrize(
    ("job_id", "status"),
    [("a" * 129, 422), ("bad%20id", 422), ("-leading-dash", 422), ("ok.job-1:2@x", 200)],
)
def test_job_id_is_bounded(client: TestClient, job_id: str, status: int) -> None:
    assert client.post(f"/v1/jobs/{job_id}/reports", json=report()).status_code == status


def test_invalid_json_and_oversized_bodies(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client(MAX_BODY_BYTES=4096)
    response = client.post("/v1/jobs/j/reports", content="{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    big_sample = node_sample(100)
    response = client.post("/v1/nodes/n/samples", json=big_sample)
    assert response.status_code == 413 and "4096" in response.text
    assert client.get("/v1/nodes").json()["count"] == 0


BAD_SAMPLES: list[tuple[str, dict[str, Any], str]] = [
    ("ratio above one", node_sample(1, utilization=1.5), "utilization"),
    ("negative power", node_sample(1, power_watts=-3), "power_watts"),
    ("no timestamp", {"gpus": [gpu(0)]}, "timestamp"),
    ("string index", {**node_sample(0), "gpus": [{**gpu(0), "index": "zero"}]}, "index"),
    ("duplicate uuid", {**node_sample(0), "gpus": [gpu(0), gpu(0)]}, "duplicate"),
    ("unknown throttle", node_sample(1, throttle_reasons=["cosmic_rays"]), "throttle_reasons"),
    ("bad job id", node_sample(1, job_id="x y"), "job_id"),
    ("missing name", {**node_sample(0), "gpus": [{"uuid": "GPU-1", "index": 0}]}, "name"),
    ("negative processes", node_sample(1, compute_processes=-1), "compute_processes"),
    ("fractional processes", node_sample(1, compute_processes=1.5), "compute_processes"),
]


@pytest.mark.parametrize(("case", "body", "field"), BAD_SAMPLES, ids=[c[0] for c in BAD_SAMPLES])
def test_bad_sample_is_rejected_and_changes_nothing(
    client: TestClient, case: str, body: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/nodes/node-1/samples", json=body)
    assert response.status_code == 422, response.text
    assert field in response.text
    assert client.get("/v1/nodes").json()["count"] == 0
    text = scrape(client)
    assert 'node="node-1"' not in text
    assert 'mfumon_ingest_requests_total{endpoint="node_samples",outcome="invalid"} 1' in text


_INFERENCE = {**report(kind="inference", interval_seconds=1.0, decode_tokens=1000), "tokens_per_second": None}

# Values the schema let through whose products overflowed to inf: the database refused the result (a 422 naming
# `body`, logged as a gap), or a later read failed. Each is bounded where it is read now.
UNBOUNDED: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("denormal peak", "POST", "/v1/jobs/j/reports", {**_INFERENCE, "peak_flops_per_gpu": 5e-324}, "peak_flops_per_gpu"),
    (
        "denormal bandwidth",
        "POST",
        "/v1/jobs/j/reports",
        {**_INFERENCE, "peak_memory_bandwidth_per_gpu": 5e-324},
        "peak_memory_bandwidth_per_gpu",
    ),
    ("denormal busy time", "POST", "/v1/jobs/j/reports", {**_INFERENCE, "decode_busy_seconds": 1e-300}, "decode_busy"),
    ("huge batch", "POST", "/v1/jobs/j/reports", {**_INFERENCE, "batch_size": 1e300}, "batch_size"),
    ("huge context", "POST", "/v1/jobs/j/reports", {**_INFERENCE, "context_tokens": 1e300}, "context_tokens"),
    ("phases too fast", "POST", "/v1/jobs/j/reports", {**_INFERENCE, "decode_tokens": 10**18}, "decode_tokens"),
    (
        "huge interval",
        "POST",
        "/v1/jobs/j/reports",
        {**report(), "tokens_per_second": None, "tokens": 10, "interval_seconds": 1e308},
        "interval_seconds",
    ),
    ("huge step", "POST", "/v1/jobs/j/reports", report(step_seconds=1e308), "step_seconds"),
    (
        "huge pinned rate",
        "PUT",
        "/v1/baselines/training|m|h100-sxm|8|bf16",
        {"mfu": 0.5, "tokens_per_second_per_gpu": 1e300},
        "tokens_per_second_per_gpu",
    ),
    (
        "NUL in a pending reason",
        "PUT",
        "/v1/scheduler/slurm",
        {
            "kind": "slurm",
            "observed_at": 1.0,
            "jobs": [{"job_id": "s", "status": "pending", "gpus_requested": 1, "pending_reason": "a\x00b"}],
        },
        "pending_reason",
    ),
]


@pytest.mark.parametrize(("case", "method", "path", "body", "field"), UNBOUNDED, ids=[c[0] for c in UNBOUNDED])
def test_a_value_whose_products_overflow_is_422_naming_it(
    client: TestClient, caplog: pytest.LogCaptureFixture, case: str, method: str, path: str, body: dict, field: str
) -> None:
    body = {k: v for k, v in body.items() if v is not None}
    response = client.request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert any(field in error["field"] for error in response.json()["detail"]), response.text
    assert "refused a validated value" not in caplog.text
    assert client.get("/v1/jobs").json()["count"] == 0 and client.get("/v1/nodes").json()["count"] == 0
