"""The schema admits only what every database stores (issue 10 #1, #2): on SQLite and PostgreSQL alike, a value
past a bound is a 422 naming the field, the largest value admitted is stored, and nothing answers 500."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import node_sample, report

REFUSED: list[tuple[str, str, dict[str, Any], str]] = [
    ("step past 10^18", "/v1/jobs/j/reports", report(step=10**18 + 1), "step"),
    ("NUL in team", "/v1/jobs/j/reports", report(team="ml\u0000ops"), "team"),
    ("NUL in pool", "/v1/jobs/j/reports", report(pool="p\u0000"), "pool"),
    ("NUL in gpu_model", "/v1/jobs/j/reports", report(gpu_model="h100\u0000"), "gpu_model"),
    ("NUL in model name", "/v1/jobs/j/reports", report(model={"params": 1e9, "name": "\u0000"}), "model.name"),
    ("newline in job name", "/v1/jobs/j", {"name": "a\nb"}, "name"),
    ("NUL in PUT team", "/v1/jobs/j", {"team": "\u0000"}, "team"),
    ("NUL in GPU name", "/v1/nodes/n/samples", node_sample(1, name="NVIDIA\u0000H100"), "gpus.0.name"),
    ("NUL in node pool", "/v1/nodes/n/samples", {**node_sample(1), "pool": "a\u0000"}, "pool"),
    (
        "FLOP/s overflow",
        "/v1/jobs/j/reports",
        {"tokens_per_second": 1e300, "model": {"params": 1e9}, "num_gpus": 1, "gpu_model": "h100-sxm"},
        "tokens_per_second",
    ),
    (
        "rate overflow from tokens and interval",
        "/v1/jobs/j/reports",
        {**report(tokens_per_second=None), "tokens": 10**18, "interval_seconds": 1e-300},
        "interval_seconds",
    ),
]


def _send(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    body = {k: v for k, v in body.items() if v is not None}
    return client.put(path, json=body) if path.count("/") == 3 else client.post(path, json=body)


@pytest.mark.parametrize(("case", "path", "body", "field"), REFUSED, ids=[c[0] for c in REFUSED])
def test_unstorable_values_are_422_naming_the_field(
    client: TestClient, case: str, path: str, body: dict[str, Any], field: str
) -> None:
    response = _send(client, path, body)
    assert response.status_code == 422, response.text
    assert field in [d["field"] for d in response.json()["detail"]]
    assert client.get("/v1/jobs").json()["count"] == 0 and client.get("/v1/nodes").json()["count"] == 0


@pytest.mark.parametrize("offset", [2**63, 2**31, 10**30])
def test_huge_offsets_are_422(client: TestClient, offset: int) -> None:
    response = client.get(f"/v1/jobs?offset={offset}")
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "offset"


def test_the_largest_admitted_values_are_stored(client: TestClient) -> None:
    """The bounds are not tighter than needed: the edge values go through on both databases."""
    edge = report(
        step=3_000_000_000,  # past PostgreSQL's INTEGER: the column is BIGINT
        tokens_per_second=1e15,
        team="t" * 128,
        pool="é" * 128,  # non-ASCII is fine: only control characters are refused
        name="名" * 128,
        model={"params": 1e30, "layers": 10_000_000, "heads": 10_000_000, "head_dim": 10_000_000, "seq_len": 10**7},
        num_gpus=10_000_000,
        peak_flops_per_gpu=1e30,
    )
    response = client.post("/v1/jobs/edge/reports", json=edge)
    assert response.status_code == 200, response.text
    job = client.get("/v1/jobs/edge").json()
    assert job["history"][-1]["step"] == 3_000_000_000 and job["team"] == "t" * 128 and job["name"] == "名" * 128
    sample = node_sample(1, name="N" * 128, xid_errors_total=10**18, nvlink_tx_bytes_per_second=1e300)
    assert client.post("/v1/nodes/edge-node/samples", json=sample).status_code == 200
    assert client.get("/v1/nodes/edge-node").json()["gpus"][0]["counters"]["xid_errors_total"] == 10**18
