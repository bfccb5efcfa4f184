"""The real thing: ``mfumon serve`` on a loopback port, a report over HTTP, the MFU read from /metrics."""

from __future__ import annotations

import httpx
import pytest

from mfumon.mfu import ModelShape, flops_per_token
from tests.conftest import LiveServer
from tests.utils.factories import LLAMA_7B, metric_value, report


def test_post_report_then_read_mfu_from_metrics(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.url, timeout=10) as http:
        response = http.post("/v1/jobs/live-1/reports", json=report(tokens_per_second=30_000, num_gpus=16))
        assert response.status_code == 200, response.text
        text = http.get("/metrics").text
        docs = http.get("/docs")
        openapi = http.get("/openapi.json").json()
    expected = 30_000 * flops_per_token(ModelShape(**LLAMA_7B), "training") / (16 * 989e12)
    assert metric_value(text, "mfumon_job_mfu_ratio", job_id="live-1", kind="training") == pytest.approx(expected)
    assert docs.status_code == 200 and "/v1/jobs/{job_id}/reports" in openapi["paths"]
