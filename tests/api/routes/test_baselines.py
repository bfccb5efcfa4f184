"""Baselines people can manage (issue 11 #6): list, pin (who, when, why), reset; a raise when a later run is steadily
better; signatures that compare across GPU counts; replicas and concurrent writers. SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from mfumon.mfu import ModelShape, default_peak_table, flops_per_token
from tests.utils.factories import LLAMA_7B, metric_value, report, scrape

SIG = "training|params=6.74e+09,layers=32,heads=32,head_dim=128,seq_len=4096|h100-sxm|8|bf16"
LAYOUT = {"tensor": 4, "pipeline": 2, "micro_batch_size": 2}
TOKENS = """\
admin-secret
ops-secret      name=ops scopes=baselines
nlp-secret      name=team-nlp scopes=jobs teams=nlp
"""


def _mfu(tokens_per_second: float, num_gpus: int = 8) -> float:
    peak = default_peak_table().lookup("h100-sxm", "bf16").peak_flops_per_gpu
    assert peak is not None
    return tokens_per_second * flops_per_token(ModelShape(**LLAMA_7B), "training") / (num_gpus * peak)


def _path(signature: str) -> str:
    return f"/v1/baselines/{quote(signature, safe='')}"


def _run(client: TestClient, job_id: str, rates: list[float], **fields: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for rate in rates:
        response = client.post(f"/v1/jobs/{job_id}/reports", json=report(tokens_per_second=rate, **fields))
        assert response.status_code == 200, response.text
        result = response.json()
    return result


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)


def test_captured_baseline_is_listed_with_where_it_came_from(client: TestClient) -> None:
    result = _run(client, "slow-first", [20_000, 20_100, 19_900])
    assert result["baseline_signature"] == SIG
    assert result["baseline_mfu"] == pytest.approx(_mfu(20_000))
    listing = client.get("/v1/baselines").json()
    assert listing["count"] == 1 and listing["next_cursor"] is None
    row = listing["data"][0]
    assert row["signature"] == SIG and row["source"] == "captured" and row["source_job_id"] == "slow-first"
    assert (row["kind"], row["device"], row["scale"], row["dtype"], row["num_gpus"]) == (
        "training",
        "h100-sxm",
        "8",
        "bf16",
        8,
    )
    assert row["tokens_per_second_per_gpu"] == pytest.approx(20_000 / 8)
    assert row["pinned"] is False and row["pinned_by"] is None and row["captures"] == 1
    assert client.get(_path(SIG)).json() == row
    assert client.get("/v1/jobs/slow-first").json()["baseline_signature"] == SIG
    assert client.get(_path(SIG.replace("|8|", "|16|"))).status_code == 404


def test_a_steadily_better_run_raises_an_unpinned_baseline(client: TestClient) -> None:
    _run(client, "slow-first", [20_000, 20_000, 20_000])
    # Better, but not by the margin (5%) in every report of a window: no raise.
    _run(client, "a-bit-better", [20_500, 20_600, 20_400, 20_500])
    # Better by far once, but not steadily (the window's spread is too wide): no raise.
    _run(client, "spiky", [30_000, 20_000, 30_000, 20_000])
    assert client.get(_path(SIG)).json()["mfu"] == pytest.approx(_mfu(20_000))
    # Every report of a stable window beats it by the margin: the baseline rises to that window's median.
    result = _run(client, "tuned", [24_000, 24_200, 23_900])
    assert result["baseline_mfu"] == pytest.approx(_mfu(24_000))
    row = client.get(_path(SIG)).json()
    assert row["source_job_id"] == "tuned" and row["captures"] == 2
    assert row["previous_mfu"] == pytest.approx(_mfu(20_000))
    # A slower run later never lowers it.
    _run(client, "regressed", [15_000, 15_000, 15_000])
    assert client.get(_path(SIG)).json()["mfu"] == pytest.approx(_mfu(24_000))
    assert metric_value(scrape(client), "mfumon_job_baseline_mfu_ratio", job_id="regressed") == pytest.approx(
        _mfu(24_000)
    )


def test_pin_from_a_job_holds_against_better_runs_and_names_who(make_client: Callable[..., TestClient]) -> None:
    client = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3, INGEST_TOKENS="admin-secret")
    admin = {"Authorization": "Bearer admin-secret"}
    for rate in (22_000, 22_000, 22_000):
        client.post("/v1/jobs/reference/reports", json=report(tokens_per_second=rate), headers=admin)
    for rate in (20_000, 20_000, 20_000):
        client.post("/v1/jobs/other/reports", json=report(tokens_per_second=rate), headers=admin)
    response = client.put(_path(SIG), json={"job_id": "other", "note": "the benchmark run"}, headers=admin)
    assert response.status_code == 200, response.text
    row = response.json()
    assert row["source"] == "pinned" and row["pinned_by"] == "env-1" and row["note"] == "the benchmark run"
    assert row["mfu"] == pytest.approx(_mfu(20_000)) and row["source_job_id"] == "other"
    assert row["previous_mfu"] == pytest.approx(_mfu(22_000)) and row["pinned_at"] >= row["captured_at"] - 1
    # A much better run does not replace a pin.
    for rate in (30_000, 30_000, 30_000):
        result = client.post("/v1/jobs/fast/reports", json=report(tokens_per_second=rate), headers=admin).json()
    assert result["baseline_mfu"] == pytest.approx(_mfu(20_000))
    assert client.get("/v1/baselines", params={"pinned": "true"}).json()["count"] == 1
    assert client.get("/v1/baselines", params={"pinned": "false"}).json()["count"] == 0


def test_pin_explicit_mfu_current_value_and_bad_requests(client: TestClient) -> None:
    named = "training|meta-llama/Llama-3.1-8B|h100-sxm|dp*.tp4.pp2.cp1.ep1.mbs2.seq8192|bf16"
    response = client.put(_path(named), json={"mfu": 0.42, "tokens_per_second_per_gpu": 3900.0})
    assert response.status_code == 200, response.text
    row = response.json()
    assert row["model"] == "meta-llama/Llama-3.1-8B" and row["scale"] == "dp*.tp4.pp2.cp1.ep1.mbs2.seq8192"
    assert row["num_gpus"] is None and row["source_job_id"] is None and row["pinned_by"] == "anonymous"
    # An empty body pins what a signature holds now; nothing held, nothing to pin.
    assert client.put(_path(SIG), json={}).status_code == 404
    _run(client, "j", [20_000, 20_000, 20_000])
    pinned = client.put(_path(SIG)).json()
    assert pinned["pinned"] is True and pinned["mfu"] == pytest.approx(_mfu(20_000)) and pinned["captures"] == 1
    # A job pinned under a signature it does not run, an unknown job, a bad signature or body: nothing changes.
    other = SIG.replace("|8|", "|16|")
    conflict = client.put(_path(other), json={"job_id": "j"})
    assert conflict.status_code == 409 and SIG in conflict.json()["detail"]
    assert client.put(_path(SIG), json={"job_id": "nobody"}).status_code == 404
    for bad in (
        "training|m|h100-sxm|8",  # four parts
        "serving|m|h100-sxm|8|bf16",  # kind
        "training|m|h100|8|bf16",  # not a device key
        "training|m|H100-SXM|8|bf16",  # not as the table spells it
        "training|m|h100-sxm|0|bf16",  # scale
        "training|m|h100-sxm|8|int4",  # dtype
    ):
        response = client.put(_path(bad), json={"mfu": 0.4})
        assert response.status_code == 422 and response.json()["detail"][0]["field"] == "signature", bad
    for body in ({"mfu": 0.4, "job_id": "j"}, {"mfu": 1.5}, {"mfu": 0}, {"tokens_per_second_per_gpu": 10}, {"x": 1}):
        assert client.put(_path(SIG), json=body).status_code == 422, body
    assert client.put(_path("training|m\nx|h100-sxm|8|bf16"), json={"mfu": 0.4}).status_code in (404, 422)
    assert client.get(_path(SIG)).json()["mfu"] == pytest.approx(_mfu(20_000))
    assert client.get("/v1/baselines").json()["count"] == 2


def test_reset_forgets_then_the_next_stable_window_captures(client: TestClient) -> None:
    _run(client, "slow-first", [10_000, 10_000, 10_000])
    client.put(_path(SIG), json={})  # pinned, and a reset clears the pin too
    assert client.delete(_path(SIG)).status_code == 204
    assert client.delete(_path(SIG)).status_code == 404  # nothing left to reset
    assert client.get("/v1/baselines").json()["count"] == 0
    row = client.get(_path(SIG)).json()
    assert row["source"] == "reset" and row["mfu"] is None and row["reset_by"] == "anonymous"
    assert row["previous_mfu"] == pytest.approx(_mfu(10_000)) and row["pinned"] is False
    assert client.get("/v1/baselines", params={"include_reset": "true"}).json()["count"] == 1
    # Jobs of the signature have no baseline now; the running job's next stable window captures one.
    assert metric_value(scrape(client), "mfumon_job_baseline_mfu_ratio", job_id="slow-first") is None
    first = _run(client, "slow-first", [18_000])
    assert first["baseline_mfu"] is None  # its window mixes 10k and 18k: not stable
    result = _run(client, "slow-first", [18_000, 18_100])
    assert result["baseline_mfu"] == pytest.approx(_mfu(18_000))
    row = client.get(_path(SIG)).json()
    assert row["source"] == "captured" and row["captures"] == 2 and row["previous_mfu"] == pytest.approx(_mfu(10_000))


def test_layout_signature_compares_data_parallel_scales(client: TestClient) -> None:
    small = _run(client, "dp2", [10_000] * 3, num_gpus=16, parallelism=LAYOUT)
    layout_sig = small["baseline_signature"]
    assert layout_sig.endswith("|h100-sxm|dp*.tp4.pp2.cp1.ep1.mbs2.seq4096|bf16")
    # Eight times the GPUs, the same per-GPU layout and micro-batch: the same workload, the same baseline.
    big = _run(client, "dp16", [76_000], num_gpus=128, parallelism=LAYOUT)
    assert big["baseline_signature"] == layout_sig
    assert big["baseline_mfu"] == pytest.approx(small["mfu"])
    assert big["mfu"] == pytest.approx(small["mfu"] * 0.95)
    # Another micro-batch, or no layout at all, is another workload.
    other = _run(client, "mbs4", [10_000], num_gpus=16, parallelism={**LAYOUT, "micro_batch_size": 4})
    assert other["baseline_signature"] != layout_sig and other["baseline_mfu"] is None
    plain = _run(client, "plain", [10_000], num_gpus=16)
    assert plain["baseline_signature"].endswith("|h100-sxm|16|bf16")
    # A GPU count the layout cannot fill is a 422 naming parallelism, and stores nothing.
    bad = client.post("/v1/jobs/odd/reports", json=report(num_gpus=12, parallelism=LAYOUT))
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "parallelism"
    assert client.get("/v1/jobs/odd").status_code == 404
    assert client.put("/v1/jobs/odd", json={"num_gpus": 12, "parallelism": LAYOUT}).status_code == 422
    # Inference keeps the exact count: serving load, not a layout, sets one GPU's work.
    served = _run(client, "serve", [10_000], num_gpus=16, kind="inference", parallelism=LAYOUT)
    assert served["baseline_signature"].endswith("|16|bf16")
    assert client.get("/v1/jobs/dp16").json()["parallelism"] == {**LAYOUT, "context": 1, "expert": 1}


def test_baselines_page_by_cursor(client: TestClient) -> None:
    for n in range(1, 6):
        assert client.put(_path(SIG.replace("|8|", f"|{n}|")), json={"mfu": 0.1 * n}).status_code == 200
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/baselines", params=params).json()
        seen += [row["signature"] for row in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(seen) and len(seen) == 5
    assert client.get("/v1/baselines", params={"cursor": "not-a-cursor!"}).status_code == 422
    assert client.get("/v1/baselines", params={"limit": 1001}).status_code == 422


def test_writes_need_the_baselines_scope(make_client: Callable[..., TestClient], tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text(TOKENS)
    client = make_client(INGEST_TOKENS_FILE=tmp_path / "tokens")
    assert client.put(_path(SIG), json={"mfu": 0.3}).status_code == 401
    assert client.put(_path(SIG), json={"mfu": 0.3}, headers={"Authorization": "Bearer nlp-secret"}).status_code == 403
    ops = {"Authorization": "Bearer ops-secret"}
    assert client.put(_path(SIG), json={"mfu": 0.3}, headers=ops).json()["pinned_by"] == "ops"
    assert client.delete(_path(SIG), headers={"Authorization": "Bearer nlp-secret"}).status_code == 403
    assert client.get(_path(SIG)).json()["mfu"] == 0.3  # reads stay open unless MFUMON_READ_REQUIRES_TOKEN
    assert client.delete(_path(SIG), headers=ops).status_code == 204
    assert client.get(_path(SIG)).json()["reset_by"] == "ops"


def test_a_team_token_cannot_hold_the_baselines_scope(tmp_path: Path) -> None:
    from mfumon.api.core.security import parse_tokens
    from mfumon.api.errors import TokenConfigError

    with pytest.raises(TokenConfigError, match="baseline"):
        parse_tokens([], ["secret name=x scopes=jobs,baselines teams=nlp"])


def test_other_replicas_and_restarts_see_pins_and_resets(make_client: Callable[..., TestClient]) -> None:
    a = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)
    b = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)
    _run(a, "j", [20_000] * 3)
    b.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
    # Job k's rates never make a stable window, so only the other replica's writes set its baseline.
    assert _run(b, "k", [10_000])["baseline_mfu"] == pytest.approx(_mfu(20_000))
    assert a.put(_path(SIG), json={"mfu": 0.5}).status_code == 200
    b.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
    assert _run(b, "k", [13_000])["baseline_mfu"] == 0.5
    assert a.delete(_path(SIG)).status_code == 204
    b.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
    assert _run(b, "k", [16_000])["baseline_mfu"] is None
    assert a.put(_path(SIG), json={"mfu": 0.4}).status_code == 200
    # A process started a day later still holds every baseline (they are not bound to the job TTL).
    c = make_client()
    c.app.state.ctx.clock = lambda: __import__("time").time() + 86_400  # type: ignore[attr-defined]
    assert _run(c, "later", [10_000])["baseline_mfu"] == 0.4


def test_concurrent_pins_and_captures_leave_one_pinned_row(client: TestClient) -> None:
    """Pins race each other and a steadily better job's captures: every write answers, one row remains, and the
    value is one of the pins (no capture replaces a pin, whichever committed first)."""
    _run(client, "warm", [20_000] * 3)
    codes: Counter[int] = Counter()
    lock = threading.Lock()
    pinned_values = [0.31, 0.32, 0.33, 0.34]

    def pin(value: float) -> None:
        for _ in range(3):
            code = client.put(_path(SIG), json={"mfu": value}).status_code
            with lock:
                codes[code] += 1

    def capture(job_id: str) -> None:
        for _ in range(6):
            code = client.post(f"/v1/jobs/{job_id}/reports", json=report(tokens_per_second=60_000)).status_code
            with lock:
                codes[code] += 1

    threads = [threading.Thread(target=pin, args=(v,)) for v in pinned_values]
    threads += [threading.Thread(target=capture, args=(f"fast-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == {200: 4 * 3 + 2 * 6}
    listing = client.get("/v1/baselines", params={"include_reset": "true"}).json()
    assert listing["count"] == 1
    row = listing["data"][0]
    assert row["pinned"] is True and row["mfu"] in pinned_values
    # Every replica-visible answer agrees with the row: the state was not left on a capture.
    assert _run(client, "after", [20_000])["baseline_mfu"] == row["mfu"]
    # Concurrent pins of a new signature: all succeed, one row.
    fresh = SIG.replace("|8|", "|32|")
    results: list[int] = []

    def pin_fresh(value: float) -> None:
        results.append(client.put(_path(fresh), json={"mfu": value}).status_code)

    threads = [threading.Thread(target=pin_fresh, args=(0.2 + i / 100,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 6
    assert client.get(_path(fresh)).json()["mfu"] in [0.2 + i / 100 for i in range(6)]


def test_concurrent_pins_and_resets_leave_row_and_state_agreeing(make_client: Callable[..., TestClient]) -> None:
    """PUT and DELETE race on one signature: each answers 200, 204 or 404 (nothing to reset), and afterwards the
    row, this replica's state and a second replica's state all say the same (the last write by version wins)."""
    a = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)
    b = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)
    codes: Counter[int] = Counter()
    lock = threading.Lock()

    def pin(value: float) -> None:
        for _ in range(4):
            code = a.put(_path(SIG), json={"mfu": value, "note": f"pin {value}"}).status_code
            with lock:
                codes[code] += 1

    def reset() -> None:
        for _ in range(4):
            code = b.delete(_path(SIG)).status_code
            with lock:
                codes[code] += 1

    threads = [threading.Thread(target=pin, args=(0.3 + i / 100,)) for i in range(3)]
    threads += [threading.Thread(target=reset) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes[200] == 12 and codes[204] + codes[404] == 12 and set(codes) <= {200, 204, 404}
    row = a.get(_path(SIG)).json()
    assert row["source"] in ("pinned", "reset")
    for client in (a, b):
        client.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
        held = client.app.state.ctx.state.baseline(SIG)  # type: ignore[attr-defined]
        assert (held.mfu if held else None) == row["mfu"]
    if row["source"] == "pinned":
        assert row["note"] == f"pin {row['mfu']}" and row["pinned_by"] == "anonymous"
    else:
        assert row["reset_by"] == "anonymous" and row["pinned"] is False and row["note"] is None
    # One more reset and one more pin settle it either way, on both replicas.
    b.delete(_path(SIG))
    assert a.put(_path(SIG), json={"mfu": 0.5}).status_code == 200
    b.app.state.ctx.refresher.load()  # type: ignore[attr-defined]
    assert _run(b, "k", [10_000])["baseline_mfu"] == 0.5
