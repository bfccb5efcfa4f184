"""The driver and firmware node agents report (issue 59) through the API: a push's ``software`` is kept per node, stored
only when it changed, shown on the node, and added to the software of the jobs on its GPUs without overriding what a
job sent; bad lists are refused and change nothing. Both databases."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from mfumon.api.db.tables import JobRow, NodeRow
from mfumon.api.services import reports
from mfumon.api.services.regressions import read_changes
from tests.utils.clock import Clock
from tests.utils.factories import node_sample, report

JSON = "application/json"
SOFTWARE = [
    {"component": "driver", "version": "550.54.15"},
    {"component": "cuda_driver", "version": "12.4"},
    {"component": "vbios", "version": "96.00.74.00.01"},
]


def _push(client: TestClient, node: str, body: dict[str, Any]) -> None:
    response = client.post(f"/v1/nodes/{node}/samples", json=body)
    assert response.status_code == 200, response.text


def _sample(
    job_id: str | None,
    node: str = "n1",
    software: list[dict[str, str]] | None = None,
    timestamp: float | None = None,
    **gpu: Any,
) -> Any:
    body = node_sample(2, job_id=job_id, **gpu)
    if timestamp is not None:
        body["timestamp"] = timestamp
    for g in body["gpus"]:  # each node its own GPUs
        g["uuid"] = g["uuid"].replace("GPU-", f"GPU-{node}-")
    if software is not None:
        body["software"] = software
    return body


def _stored(client: TestClient, node: str) -> Any:
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    ctx.sample_writer.flush()
    with ctx.sessions() as session:
        return session.scalars(select(NodeRow.software).where(NodeRow.name == node)).one()


def test_the_software_is_stored_kept_and_shown_on_the_node(client: TestClient) -> None:
    _push(client, "n1", _sample(None, software=SOFTWARE))
    assert client.get("/v1/nodes/n1").json()["software"] == SOFTWARE
    assert _stored(client, "n1") == SOFTWARE
    _push(client, "n1", _sample(None))  # a push without one (an older agent, a dcgm source) keeps it
    assert client.get("/v1/nodes/n1").json()["software"] == SOFTWARE
    assert _stored(client, "n1") == SOFTWARE
    upgraded = [{"component": "driver", "version": "560.35.03"}, *SOFTWARE[1:]]
    _push(client, "n1", _sample(None, software=upgraded))
    assert client.get("/v1/nodes/n1").json()["software"] == upgraded
    assert _stored(client, "n1") == upgraded


def test_the_column_is_written_only_when_the_software_changed(client: TestClient) -> None:
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    queued: list[Any] = []
    real = ctx.sample_writer.queue

    def spy(*args: Any) -> None:
        queued.append(args[5] if len(args) > 5 else None)
        real(*args)

    ctx.sample_writer.queue = spy
    for software in (SOFTWARE, SOFTWARE, None, SOFTWARE, SOFTWARE[:1], SOFTWARE[:1]):
        _push(client, "n1", _sample(None, software=software))
    assert queued == [SOFTWARE, None, None, None, SOFTWARE[:1], None]
    assert _stored(client, "n1") == SOFTWARE[:1]


def test_a_replica_reads_the_stored_software(make_client: Any) -> None:
    first = make_client()
    _push(first, "n1", _sample(None, software=SOFTWARE))
    _push(first, "n1", _sample(None))  # the stored sample has none: the column keeps it
    first.app.state.ctx.sample_writer.flush()  # type: ignore[attr-defined]
    second = make_client()  # loads the nodes from the database at start
    assert second.get("/v1/nodes/n1").json()["software"] == SOFTWARE


def test_a_job_shows_its_nodes_software_without_losing_its_own(client: TestClient) -> None:
    own = {"pytorch": "2.5.1", "driver": "550.54.14"}  # the job's reporter saw its driver itself: it wins
    assert client.put("/v1/jobs/j1", json={"software": own}).status_code == 200
    _push(client, "n1", _sample("j1", software=SOFTWARE))
    assert client.get("/v1/jobs/j1").json()["software"] == {**own, "cuda_driver": "12.4", "vbios": "96.00.74.00.01"}
    # a job that sent no fingerprint shows its nodes'
    assert client.put("/v1/jobs/j2", json={"num_gpus": 2}).status_code == 200
    _push(client, "n2", _sample("j2", node="n2", software=SOFTWARE))
    assert client.get("/v1/jobs/j2").json()["software"] == {c["component"]: c["version"] for c in SOFTWARE}
    listed = {j["job_id"]: j["software"] for j in client.get("/v1/jobs").json()["data"]}
    assert listed["j1"]["vbios"] == "96.00.74.00.01" and listed["j1"]["driver"] == "550.54.14"
    page = client.get("/ui/jobs/j1").text
    assert "96.00.74.00.01" in page and "550.54.14" in page


def test_nodes_that_disagree_are_named_with_every_version(client: TestClient) -> None:
    assert client.put("/v1/jobs/big", json={"num_gpus": 4}).status_code == 200
    _push(client, "n1", _sample("big", software=SOFTWARE))
    other = [{"component": "driver", "version": "560.35.03"}, SOFTWARE[1], {"component": "vbios", "version": "96.1"}]
    _push(client, "n2", _sample("big", node="n2", software=[*other, SOFTWARE[2]]))
    software = client.get("/v1/jobs/big").json()["software"]
    assert software == {"driver": "550.54.15|560.35.03", "cuda_driver": "12.4", "vbios": "96.00.74.00.01|96.1"}


def test_a_report_stores_the_new_node_keys_once_and_the_job_keeps_them_after_it_ended(client: TestClient) -> None:
    clock = Clock(client, start=1.8e9)
    assert client.put("/v1/jobs/j1", json={"software": {"driver": "550.54.14", "nccl": "2.21.5"}}).status_code == 200
    _push(client, "n1", _sample("j1", software=SOFTWARE, timestamp=clock.now))
    ctx = client.app.state.ctx  # type: ignore[attr-defined]

    def column() -> Any:
        with ctx.sessions() as session:
            return session.scalars(select(JobRow.software).where(JobRow.job_id == "j1")).one()

    assert client.post("/v1/jobs/j1/reports", json=report(num_gpus=2)).status_code == 200
    stored = column()
    assert stored == {"driver": "550.54.14", "nccl": "2.21.5", "cuda_driver": "12.4", "vbios": "96.00.74.00.01"}
    clock.advance(10)
    changed = [{"component": "vbios", "version": "96.00.74.00.02"}, *SOFTWARE[:2]]  # a VBIOS flashed mid-job
    _push(client, "n1", _sample("j1", software=changed, timestamp=clock.now))
    assert client.post("/v1/jobs/j1/reports", json=report(num_gpus=2)).status_code == 200
    assert column() == stored  # nothing new: the stored keys stay as they were, nothing written
    assert client.post("/v1/jobs/j1/end", json={}).status_code == 200
    _push(client, "n1", _sample(None, software=SOFTWARE, timestamp=clock.now + 1))  # its GPUs moved on
    assert client.get("/v1/jobs/j1").json()["software"] == stored


def test_the_regressions_comparison_sees_a_driver_only_the_nodes_reported(client: TestClient) -> None:
    """Jobs that sent no driver (their reporter predates it, or `mfumon wrap` without NVML): the node agents' driver is
    stored at their reports and compared once they ended, as a fingerprint's would be."""
    clock = Clock(client, start=1_800_000_000.0)
    fleet = [("old", "550.54.15", 25_000.0), ("new", "560.35.03", 23_000.0)]
    for name, driver, tokens_per_second in fleet:
        for i in range(3):
            job = f"{name}-{i}"
            software = [{"component": "driver", "version": driver}, *SOFTWARE[1:]]
            assert client.put(f"/v1/jobs/{job}", json={"software": {"pytorch": "2.5.1"}}).status_code == 200
            for jitter in (1.0, 1.002, 0.998, 1.001):
                _push(client, "n1", _sample(job, software=software, timestamp=clock.now))
                body = report(num_gpus=2, tokens_per_second=tokens_per_second * (1 + i / 1000) * jitter)
                assert client.post(f"/v1/jobs/{job}/reports", json={**body, "step_seconds": 1.0}).status_code == 200
                clock.advance(10)
            assert client.post(f"/v1/jobs/{job}/end", json={}).status_code == 200
    _push(client, "n1", _sample(None, software=SOFTWARE, timestamp=clock.now))  # the node is idle now
    changes = {c.component: c for c in read_changes(client.app.state.ctx, 0, clock.now + 1)}  # type: ignore[attr-defined]
    assert set(changes) == {"driver"}  # cuda_driver and vbios never changed, pytorch neither
    driver = changes["driver"]
    assert (driver.before, driver.after, driver.verdict) == ("550.54.15", "560.35.03", "regression")
    assert sorted(driver.jobs_before) == ["old-0", "old-1", "old-2"]


def test_a_report_survives_a_failing_merge(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _push(client, "n1", _sample("j1", software=SOFTWARE))

    def broken(*_args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(reports, "new_node_software", broken)
    response = client.post("/v1/jobs/j1/reports", json=report(num_gpus=2))
    assert response.status_code == 200 and response.json()["mfu"] is not None
    assert client.get("/v1/jobs/j1").json()["reports_received"] == 1


BAD: list[Any] = [
    "driver 550",  # not a list
    [{"component": "driver"}],  # no version
    [{"component": "Driver", "version": "1"}],  # upper case
    [{"component": "-driver", "version": "1"}],
    [{"component": "d" * 33, "version": "1"}],
    [{"component": "driver", "version": ""}],
    [{"component": "driver", "version": " 550.54.15"}],  # a blank at an end
    [{"component": "driver", "version": "550.54.15\n"}],
    [{"component": "driver", "version": "v" * 65}],
    [{"component": "driver", "version": "55\u00e90"}],  # not ASCII
    [{"component": "driver", "version": "55\x000"}],  # a control character
    [{"component": "driver", "version": 550}],  # a number
    [{"component": "driver", "version": "1", "extra": "x"}],
    [{"component": "driver", "version": "1"}, {"component": "driver", "version": "1"}],  # the same pair twice
    [{"component": f"c{i}", "version": "1"} for i in range(17)],  # more than 16
]


@pytest.mark.parametrize("software", BAD)
def test_a_bad_software_list_is_refused_and_changes_nothing(client: TestClient, software: Any) -> None:
    _push(client, "n1", _sample("j1", software=SOFTWARE))
    before = client.get("/v1/nodes/n1").json()
    bad = _sample("j1", software=copy.deepcopy(software), power_watts=123.0)
    response = client.post(
        "/v1/nodes/n1/samples", content=json.dumps(bad), headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert "software" in response.text
    after = client.get("/v1/nodes/n1").json()
    assert after["software"] == SOFTWARE and after["samples_received"] == before["samples_received"]
    assert after["gpus"][0]["counters"]["power_watts"] != 123.0
    assert _stored(client, "n1") == SOFTWARE
