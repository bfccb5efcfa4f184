"""The remediation audit (``POST``/``GET /v1/remediations``): stored with who recorded it, repeats of a dry run or a
withheld action folded into one row, the ``remediate`` scope, and the durable counter."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.utils.factories import metric_value, scrape


def decision(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "node": "gpu-node-1",
        "scheduler": "slurm",
        "action": "drain",
        "reason": "xid",
        "outcome": "done",
        "checks": ["xid"],
        "pools": ["train", "infer"],
        "detail": "on the drain list for 301 s",
        "actor": "ctl-1:4242",
        "attempts": 1,
        "timestamp": time.time() - 60,
    }
    body.update(overrides)
    return body


def _post(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/remediations", json=decision(**overrides))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_decisions_are_stored_and_listed_newest_first(client: TestClient) -> None:
    now = time.time()
    drained = _post(client, timestamp=now - 100)
    assert drained["recorded_by"] == "anonymous" and drained["repeats"] == 1
    assert (drained["checks"], drained["pools"], drained["attempts"]) == (["xid"], ["train", "infer"], 1)
    _post(client, node="gpu-node-2", reason="budget_pool", outcome="withheld", timestamp=now - 50)
    _post(client, action="resume", reason="healthy", checks=[], outcome="failed", attempts=3, timestamp=now - 10)
    listed = client.get("/v1/remediations").json()
    assert listed["count"] == 3
    assert [(r["node"], r["action"], r["outcome"]) for r in listed["data"]] == [
        ("gpu-node-1", "resume", "failed"),
        ("gpu-node-2", "drain", "withheld"),
        ("gpu-node-1", "drain", "done"),
    ]
    only = client.get("/v1/remediations", params={"node": "gpu-node-1", "outcome": "done"}).json()["data"]
    assert [r["id"] for r in only] == [drained["id"]]
    recent = client.get("/v1/remediations", params={"since": now - 60, "action": "drain"}).json()["data"]
    assert [r["node"] for r in recent] == ["gpu-node-2"]
    assert client.get("/v1/remediations", params={"limit": 1}).json()["count"] == 1


def test_repeats_of_a_dry_run_or_withheld_decision_fold_into_one_row_done_ones_never(client: TestClient) -> None:
    now = time.time() - 7200
    for i in range(3):
        _post(client, outcome="dry_run", timestamp=now + 30 * i)
    for i in range(2):
        _post(client, outcome="done", timestamp=now + 30 * i)
    _post(client, outcome="dry_run", reason="responsive", timestamp=now + 100)  # another reason: its own row
    rows = client.get("/v1/remediations", params={"limit": 10}).json()["data"]
    dry = [r for r in rows if r["outcome"] == "dry_run"]
    assert sorted((r["reason"], r["repeats"]) for r in dry) == [("responsive", 1), ("xid", 3)]
    xid = next(r for r in dry if r["reason"] == "xid")
    assert (xid["first_at"], xid["last_at"]) == (pytest.approx(now), pytest.approx(now + 60))
    assert [r["repeats"] for r in rows if r["outcome"] == "done"] == [1, 1]
    late = _post(client, outcome="dry_run", timestamp=now + 60 + 3601)  # an hour later: a new episode
    assert late["repeats"] == 1 and late["id"] != xid["id"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"action": "reboot"}, "action"),
        ({"outcome": "maybe"}, "outcome"),
        ({"reason": 'xid"} 1\nmfumon_fake{a="'}, "reason"),  # a label value: no quotes, braces or newlines
        ({"scheduler": "pbs"}, "scheduler"),
        ({"node": "a/b"}, "node"),
        ({"checks": ["XID!"]}, "checks.0"),
        ({"attempts": 1000}, "attempts"),
        ({"timestamp": time.time() + 86400}, "timestamp"),
        ({"color": "red"}, "color"),
    ],
)
def test_invalid_decisions_are_refused(client: TestClient, overrides: dict[str, Any], field: str) -> None:
    response = client.post("/v1/remediations", json=decision(**overrides))
    assert response.status_code == 422, response.text
    assert field in {d["field"] for d in response.json()["detail"]}
    assert client.get("/v1/remediations").json()["count"] == 0


def test_only_a_token_with_the_remediate_scope_records(make_client: Callable[..., TestClient], tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("loop-secret-0123456789 name=remediate-ctl scopes=remediate\nslurm-secret scopes=scheduler\n")
    client = make_client(INGEST_TOKENS_FILE=tokens)
    assert client.post("/v1/remediations", json=decision()).status_code == 401
    refused = client.post("/v1/remediations", json=decision(), headers={"Authorization": "Bearer slurm-secret"})
    assert refused.status_code == 403 and "remediate" in refused.json()["detail"]
    ok = client.post("/v1/remediations", json=decision(), headers={"Authorization": "Bearer loop-secret-0123456789"})
    assert ok.status_code == 200 and ok.json()["recorded_by"] == "remediate-ctl"
    assert [r["recorded_by"] for r in client.get("/v1/remediations").json()["data"]] == ["remediate-ctl"]


def test_every_decision_is_counted_on_metrics(client: TestClient) -> None:
    for _ in range(2):
        _post(client, outcome="dry_run")
    _post(client, node="n2", outcome="withheld", reason="budget_pool")
    _post(client, action="resume", reason="healthy", outcome="done")
    text = scrape(client)
    assert "# TYPE mfumon_remediation_actions_total counter" in text
    assert metric_value(text, "mfumon_remediation_actions_total", action="drain", reason="xid", outcome="dry_run") == 2
    withheld = metric_value(text, "mfumon_remediation_actions_total", reason="budget_pool", outcome="withheld")
    assert withheld == 1
    assert metric_value(text, "mfumon_remediation_actions_total", action="resume", outcome="done") == 1
