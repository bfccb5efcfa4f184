"""Job reports through the ASGI app: MFU from the engine, derived ratios, lifecycle, baselines, history."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mfumon.mfu import ModelShape, default_peak_table, flops_per_token
from tests.utils.factories import LLAMA_7B, metric_value, node_sample, report, scrape


def _expected_mfu(tokens_per_second: float, num_gpus: int, device: str, dtype: str = "bf16") -> float:
    peak = default_peak_table().lookup(device, dtype).peak_flops_per_gpu
    assert peak is not None
    return tokens_per_second * flops_per_token(ModelShape(**LLAMA_7B), "training") / (num_gpus * peak)


def test_report_returns_mfu_and_exports_it(client: TestClient) -> None:
    response = client.post(
        "/v1/jobs/train-1/reports", json=report(comm_seconds=0.3, step_seconds=1.2, data_wait_seconds=0.06)
    )
    assert response.status_code == 200, response.text
    body = response.json()
    expected = _expected_mfu(25_000, 8, "NVIDIA H100 80GB HBM3")
    assert body["mfu"] == pytest.approx(expected)
    assert body["device"] == "h100-sxm"
    assert body["peak_flops_per_second"] == pytest.approx(8 * 989e12)
    assert body["comm_ratio"] == pytest.approx(0.25)
    assert body["data_wait_ratio"] == pytest.approx(0.05)

    text = scrape(client)
    assert metric_value(text, "mfumon_job_mfu_ratio", job_id="train-1", kind="training") == pytest.approx(expected)
    assert metric_value(text, "mfumon_job_comm_ratio", job_id="train-1") == pytest.approx(0.25)
    assert metric_value(text, "mfumon_job_tokens_per_second", job_id="train-1") == 25_000
    # No exporter has seen its GPUs: the report's num_gpus allocates none, it sits apart as unverified, and the
    # cluster (the GPUs exporters report) has no MFU yet.
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="train-1") == 0
    assert metric_value(text, "mfumon_job_gpus_unverified", job_id="train-1") == 8
    assert metric_value(text, "mfumon_cluster_mfu_ratio") is None


def test_tokens_and_interval_equal_rate(client: TestClient) -> None:
    body = report()
    del body["tokens_per_second"]
    body.update(tokens=250_000, interval_seconds=10)
    assert client.post("/v1/jobs/j/reports", json=body).json()["tokens_per_second"] == 25_000


def test_inference_moe_and_explicit_flops(client: TestClient) -> None:
    moe = {"params": 46.7e9, "active_params": 12.9e9}
    inference = client.post(
        "/v1/jobs/inf/reports", json=report(kind="inference", model=moe, tokens_per_second=1e4)
    ).json()
    assert inference["flops_per_token"] == pytest.approx(2 * 12.9e9)
    explicit = client.post(
        "/v1/jobs/x/reports", json=report(model={"flops_per_token": 1e11}, tokens_per_second=1e4)
    ).json()
    assert explicit["mfu"] == pytest.approx(1e11 * 1e4 / (8 * 989e12))


def test_hfu_only_when_the_job_says_it_recomputes(client: TestClient) -> None:
    plain = client.post("/v1/jobs/a/reports", json=report()).json()
    assert plain["hfu"] is None
    recompute = client.post("/v1/jobs/b/reports", json=report(recompute_activations=True)).json()
    assert recompute["hfu"] == pytest.approx(recompute["mfu"] * 8 / 6)
    assert metric_value(scrape(client), "mfumon_job_hfu_ratio", job_id="b") == pytest.approx(recompute["hfu"])


def test_unknown_device_gives_null_mfu_with_reason_and_a_counter(client: TestClient) -> None:
    body = client.post("/v1/jobs/u/reports", json=report(gpu_model="Fancy Accelerator 9000")).json()
    assert body["mfu"] is None
    assert "Fancy Accelerator 9000" in body["reason"]
    text = scrape(client)
    assert metric_value(text, "mfumon_job_mfu_ratio", job_id="u") is None
    assert metric_value(text, "mfumon_unknown_device_reports_total", gpu_model="Fancy Accelerator 9000") == 1
    assert metric_value(text, "mfumon_job_tokens_per_second", job_id="u") == 25_000
    # An explicit peak makes it computable.
    fixed = client.post(
        "/v1/jobs/u/reports", json=report(gpu_model="Fancy Accelerator 9000", peak_flops_per_gpu=500e12)
    ).json()
    assert fixed["mfu"] == pytest.approx(_expected_mfu(25_000, 8, "h100-sxm") * 989 / 500)


def test_dtype_without_a_peak_is_explained(client: TestClient) -> None:
    body = client.post("/v1/jobs/f/reports", json=report(gpu_model="NVIDIA A100-SXM4-80GB", dtype="fp8")).json()
    assert body["mfu"] is None and "fp8" in body["reason"]


def test_impossible_mfu_is_null_not_above_one(client: TestClient) -> None:
    body = client.post("/v1/jobs/big/reports", json=report(tokens_per_second=1e9)).json()
    assert body["mfu"] is None and "1" in body["reason"]


def test_exporter_attribution_fills_gpu_model_and_count(client: TestClient) -> None:
    assert client.post("/v1/nodes/node-a/samples", json=node_sample(8, job_id="att")).status_code == 200
    body = report()
    del body["num_gpus"], body["gpu_model"]
    result = client.post("/v1/jobs/att/reports", json=body).json()
    assert result["num_gpus"] == 8 and result["device"] == "h100-sxm"
    assert result["mfu"] == pytest.approx(_expected_mfu(25_000, 8, "h100-sxm"))


def test_missing_gpu_information_gives_reason(client: TestClient) -> None:
    body = report()
    del body["gpu_model"]
    result = client.post("/v1/jobs/nogpu/reports", json=body).json()
    assert result["mfu"] is None and "gpu_model" in result["reason"]


def test_pending_job_counts_as_requested_and_lowers_satisfaction(client: TestClient) -> None:
    client.post("/v1/nodes/n1/samples", json=node_sample(8, job_id="run", pool="train"))
    client.post("/v1/jobs/run/reports", json=report(pool="train", gpus_requested=8))
    assert (
        client.put("/v1/jobs/wait", json={"pool": "train", "gpus_requested": 24, "kind": "training"}).status_code == 200
    )
    text = scrape(client)
    assert metric_value(text, "mfumon_pool_resource_satisfaction_ratio", pool="train") == pytest.approx(8 / 32)
    assert metric_value(text, "mfumon_job_gpus_allocated", job_id="wait") == 0
    assert metric_value(text, "mfumon_job_gpus_requested", job_id="wait") == 24
    assert metric_value(text, "mfumon_pool_jobs_pending", pool="train") == 1
    job = client.get("/v1/jobs/wait").json()
    assert job["status"] == "pending" and job["gpus_allocated"] == 0


def test_ended_job_series_vanish_and_job_stays_readable(client: TestClient) -> None:
    client.post("/v1/jobs/done/reports", json=report())
    assert metric_value(scrape(client), "mfumon_job_mfu_ratio", job_id="done") is not None
    ended = client.post("/v1/jobs/done/end", json={"exit_code": 0})
    assert ended.status_code == 200 and ended.json()["status"] == "ended"
    text = scrape(client)
    assert 'job_id="done"' not in text
    assert client.get("/v1/jobs/done").json()["exit_code"] == 0
    assert client.post("/v1/jobs/nope/end").status_code == 404


def test_an_ended_job_is_counted_as_forgotten_so_its_memory_is_handed_back(client: TestClient) -> None:
    """What mfumon.api.core.memory.Trimmer watches: the state's pruned views and the renderer's dropped series."""
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    client.post("/v1/jobs/done/reports", json=report())
    scrape(client)
    in_state, rendered = ctx.state.forgotten, ctx.renderer.forgotten
    client.post("/v1/jobs/done/end", json={"exit_code": 0})
    scrape(client)
    assert ctx.renderer.forgotten > rendered  # its series, dropped by that scrape
    ctx.state.prune(ctx.clock())  # (or the maintenance thread already did)
    assert ctx.state.forgotten == in_state + 1
    ctx.state.prune(ctx.clock())
    assert ctx.state.forgotten == in_state + 1  # counted once


def test_silent_job_series_vanish_after_ttl(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client(JOB_TTL_SECONDS=60)
    client.post("/v1/jobs/quiet/reports", json=report())
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    real_clock = ctx.clock
    ctx.clock = lambda: real_clock() + 61
    assert 'job_id="quiet"' not in scrape(client)


def test_baseline_captured_from_first_stable_window_and_shared_by_signature(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client(BASELINE_WARMUP_REPORTS=2, BASELINE_WINDOW_REPORTS=3)
    rates = [5_000, 12_000, 25_000, 25_500, 24_800, 25_100]  # two warm-up reports, then stable
    for rate in rates:
        result = client.post("/v1/jobs/first/reports", json=report(tokens_per_second=rate)).json()
    # Reports 3-5 are the first window after warm-up whose spread is small: their median is the baseline.
    stable = _expected_mfu(25_000, 8, "h100-sxm")
    assert result["baseline_mfu"] == pytest.approx(stable)
    # A later run of the same workload is compared against it.
    later = client.post("/v1/jobs/second/reports", json=report(tokens_per_second=12_500)).json()
    assert later["baseline_mfu"] == pytest.approx(stable)
    text = scrape(client)
    assert metric_value(text, "mfumon_job_baseline_mfu_ratio", job_id="second") == pytest.approx(stable)
    job = client.get("/v1/jobs/second").json()
    assert job["mfu_vs_baseline"] == pytest.approx(later["mfu"] / stable)
    # A different GPU count is a different workload: no baseline yet.
    other = client.post("/v1/jobs/third/reports", json=report(num_gpus=16)).json()
    assert other["baseline_mfu"] is None


def test_unstable_window_captures_no_baseline(make_client) -> None:  # type: ignore[no-untyped-def]
    client = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)
    for rate in [10_000, 20_000, 30_000, 10_000]:
        result = client.post("/v1/jobs/jumpy/reports", json=report(tokens_per_second=rate)).json()
    assert result["baseline_mfu"] is None


def test_job_detail_has_history_and_gpus(client: TestClient) -> None:
    client.post("/v1/nodes/n1/samples", json=node_sample(4, job_id="h"))
    for rate in (10_000, 20_000, 30_000):
        client.post("/v1/jobs/h/reports", json=report(tokens_per_second=rate, num_gpus=4, step=rate // 100))
    job = client.get("/v1/jobs/h", params={"history": 2}).json()
    assert [entry["tokens_per_second"] for entry in job["history"]] == [20_000, 30_000]
    assert job["history"][-1]["step"] == 300
    assert len(job["gpus"]) == 4 and job["gpus_allocated"] == 4
    assert job["latest"]["mfu"] == pytest.approx(_expected_mfu(30_000, 4, "h100-sxm"))
    listing = client.get("/v1/jobs").json()
    assert listing["count"] == 1 and listing["data"][0]["job_id"] == "h"
    assert client.get("/v1/jobs/missing").status_code == 404


def test_history_older_than_retention_is_pruned(client: TestClient) -> None:
    client.post("/v1/jobs/old/reports", json=report())
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    assert ctx.refresher.prune_history(retention_seconds=3600) == 0
    real_clock = ctx.refresher._clock
    ctx.refresher._clock = lambda: real_clock() + 7200
    assert ctx.refresher.prune_history(retention_seconds=3600) == 1
    assert client.get("/v1/jobs/old").json()["history"] == []


def test_database_outage_is_a_503_that_clients_retry(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy.exc import OperationalError

    ctx = client.app.state.ctx  # type: ignore[attr-defined]

    def unavailable() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    monkeypatch.setattr(ctx.sessions, "begin", unavailable)
    response = client.post("/v1/jobs/down/reports", json=report())
    assert response.status_code == 503 and "retry" in response.text
    assert 'outcome="unavailable"' in scrape(client)
