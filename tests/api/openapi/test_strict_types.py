"""Numbers are JSON numbers, booleans are booleans (issue 28 #4), in every request body.

``{"tokens_per_second": true}`` answered 200 with an MFU, ``"1000"`` passed as a number, ``true`` as ``seconds``,
``exit_code`` or ``gpus``: pydantic's lax mode coerced them. Every request schema is strict now: a wrong type is a
422 naming the field, and changes nothing. An integer may still be written ``8.0`` (the same integer to JSON
Schema), and a number as ``8``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.services.ingest import parse_push
from tests.utils.factories import gpu, ib_port, node_sample, report, scrape

SIGNATURE = "training|llama-8b|h100-sxm|8|bf16"


def _with(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``body`` with the field at the dotted ``path`` (list indexes as digits) set to ``value``."""
    out: Any = json.loads(json.dumps(body))
    node = out
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out  # type: ignore[no-any-return]


def _scheduler_sync(**job: Any) -> dict[str, Any]:
    entry = {"job_id": "s-1", "status": "running", "gpus_requested": 8, "gpus_allocated": 8, **job}
    return {
        "kind": "slurm",
        "observed_at": time.time(),
        "jobs": [entry],
        "quotas": [{"team": "llm", "gpus": 64}],
    }


# (what, method, path, a body that is accepted, the field made wrong, the wrong value, the field the 422 names)
WRONG_TYPES: list[tuple[str, str, str, dict[str, Any], str, Any, str]] = [
    ("report rate true", "POST", "/v1/jobs/j/reports", report(), "tokens_per_second", True, "tokens_per_second"),
    ("report rate string", "POST", "/v1/jobs/j/reports", report(), "tokens_per_second", "1000", "tokens_per_second"),
    ("report params words", "POST", "/v1/jobs/j/reports", report(), "model.params", "7 billion", "params"),
    ("report params true", "POST", "/v1/jobs/j/reports", report(), "model.params", True, "params"),
    ("report gpus true", "POST", "/v1/jobs/j/reports", report(), "num_gpus", True, "num_gpus"),
    ("report gpus string", "POST", "/v1/jobs/j/reports", report(), "num_gpus", "8", "num_gpus"),
    ("report layers string", "POST", "/v1/jobs/j/reports", report(), "model.layers", "32", "layers"),
    ("report recompute 1", "POST", "/v1/jobs/j/reports", report(), "recompute_activations", 1, "recompute"),
    ("report recompute str", "POST", "/v1/jobs/j/reports", report(), "recompute_activations", "true", "recompute"),
    ("report step true", "POST", "/v1/jobs/j/reports", report(step=5), "step", True, "step"),
    ("report comm string", "POST", "/v1/jobs/j/reports", report(comm_seconds=0.1), "comm_seconds", "0.1", "comm"),
    ("register gpus true", "PUT", "/v1/jobs/j", {"gpus_requested": 8}, "gpus_requested", True, "gpus_requested"),
    ("register params str", "PUT", "/v1/jobs/j", {"model": {"params": 7e9}}, "model.params", "7e9x", "params"),
    ("end exit code true", "POST", "/v1/jobs/j/end", {"exit_code": 0}, "exit_code", True, "exit_code"),
    ("end exit code string", "POST", "/v1/jobs/j/end", {"exit_code": 0}, "exit_code", "0", "exit_code"),
    ("event seconds true", "POST", "/v1/jobs/j/events", {"type": "eval", "seconds": 4.0}, "seconds", True, "seconds"),
    ("event seconds str", "POST", "/v1/jobs/j/events", {"type": "eval", "seconds": 4.0}, "seconds", "4", "seconds"),
    ("event step string", "POST", "/v1/jobs/j/events", {"type": "eval", "step": 4}, "step", "4", "step"),
    (
        "event exit code true",
        "POST",
        "/v1/jobs/j/events",
        {"type": "failure", "exit_code": 1},
        "exit_code",
        True,
        "exit",
    ),
    ("sample index true", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.index", True, "index"),
    ("sample ratio true", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.utilization", True, "utilization"),
    ("sample ratio string", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.utilization", "0.5", "utilization"),
    ("sample power string", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.power_watts", "300", "power_watts"),
    ("sample up 1", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.up", 1, "up"),
    ("sample up string", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.up", "true", "up"),
    ("sample flag true", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.row_remap_pending", True, "row_remap"),
    ("sample xid true", "POST", "/v1/nodes/n/samples", node_sample(1), "gpus.0.xid_errors_total", True, "xid_errors"),
    ("sample time string", "POST", "/v1/nodes/n/samples", node_sample(1), "timestamp", "1764590400", "timestamp"),
    (
        "sample port true",
        "POST",
        "/v1/nodes/n/samples",
        {**node_sample(1), "ib_ports": [ib_port()]},
        "ib_ports.0.port",
        True,
        "port",
    ),
    ("sync gpus true", "PUT", "/v1/scheduler/slurm", _scheduler_sync(), "jobs.0.gpus_requested", True, "gpus_req"),
    ("sync quota false", "PUT", "/v1/scheduler/slurm", _scheduler_sync(), "quotas.0.gpus", False, "gpus"),
    ("sync restarts str", "PUT", "/v1/scheduler/slurm", _scheduler_sync(), "jobs.0.restarts", "1", "restarts"),
    ("sync time string", "PUT", "/v1/scheduler/slurm", _scheduler_sync(), "observed_at", "1764590400", "observed_at"),
    (
        "sync units true",
        "PUT",
        "/v1/scheduler/slurm",
        _scheduler_sync(units=[[8, 1]]),
        "jobs.0.units.0.0",
        True,
        "units",
    ),
    ("pin mfu true", "PUT", f"/v1/baselines/{SIGNATURE}", {"mfu": 0.4}, "mfu", True, "mfu"),
    ("pin mfu string", "PUT", f"/v1/baselines/{SIGNATURE}", {"mfu": 0.4}, "mfu", "0.4", "mfu"),
]


def _state(client: TestClient) -> tuple[Any, ...]:
    return (
        client.get("/v1/jobs").json()["data"],
        client.get("/v1/nodes").json()["data"],
        client.get("/v1/scheduler").json()["data"],
        client.get("/v1/baselines", params={"include_reset": True}).json()["data"],
    )


@pytest.mark.parametrize(
    ("case", "method", "path", "good", "field", "value", "named"), WRONG_TYPES, ids=[c[0] for c in WRONG_TYPES]
)
def test_a_wrong_type_is_422_naming_the_field_and_changes_nothing(
    client: TestClient, case: str, method: str, path: str, good: dict[str, Any], field: str, value: Any, named: str
) -> None:
    if path.endswith("/end") or path.endswith("/events"):
        assert client.post("/v1/jobs/j/reports", json=report()).status_code == 200  # a job to end or tell of
    before = _state(client)
    response = client.request(method, path, json=_with(good, field, value))
    assert response.status_code == 422, (case, response.text)
    assert any(named in error["field"] for error in response.json()["detail"]), response.text
    assert _state(client) == before
    assert client.request(method, path, json=good).status_code == 200, "the same body with the right type is taken"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/jobs/j/reports", report(num_gpus=8.0, model={"params": 7e9, "layers": 32.0})),  # 8.0 is the integer 8
        ("/v1/jobs/j/reports", report(tokens_per_second=25000, model={"params": 7_000_000_000})),  # ints as numbers
        ("/v1/nodes/n/samples", {**node_sample(0), "gpus": [{**gpu(0, xid_errors_total=3.0), "index": 0.0}]}),
    ],
)
def test_integers_may_be_written_with_a_zero_fraction_and_numbers_as_integers(
    client: TestClient, path: str, body: dict[str, Any]
) -> None:
    assert client.post(path, json=body).status_code == 200


def test_a_count_past_its_bound_does_not_round_into_it(client: TestClient) -> None:
    """10**18 + 1 is out of range even though the float nearest to it, 1e18, is in it."""
    body = {**node_sample(0), "gpus": [gpu(0, xid_errors_total=10**18 + 1)]}
    response = client.post("/v1/nodes/n/samples", json=body)
    assert response.status_code == 422 and "xid_errors_total" in response.text


TOKENS = "exporter-secret  name=exporters scopes=nodes\n"
FAST = {"content-type": "application/json", "authorization": "Bearer exporter-secret"}


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpus.0.up", 1), ("gpus.0.utilization", True), ("gpus.0.power_watts", "300"), ("gpus.0.index", "0")],
)
def test_the_push_fast_path_is_as_strict(make_client, tmp_path: Path, field: str, value: Any) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "tokens").write_text(TOKENS)
    client: TestClient = make_client(INGEST_TOKENS_FILE=tmp_path / "tokens")
    assert parse_push(json.dumps(_with(node_sample(1), field, value)).encode()) is None  # the fast door declines it
    response = client.post("/v1/nodes/n1/samples", json=_with(node_sample(1), field, value), headers=FAST)
    assert response.status_code == 422 and field.rsplit(".", 1)[-1] in response.text
    assert client.get("/v1/nodes").json()["count"] == 0
    assert 'node="n1"' not in scrape(client)
