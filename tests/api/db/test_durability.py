"""What a crash can lose, with ``kill -9`` on a real server, on SQLite and PostgreSQL.

- A job report, registration or end is never answered before it is stored: none is ever lost.
- A node sample is answered from memory and stored by the next group commit: once the server says nothing is
  queued (``mfumon_sample_queue_nodes`` 0), everything it answered is stored. Pushes answered just before the kill
  may be lost, but only whole: a node shows its newest or its previous stored sample, never a mix, never nothing.
- A graceful stop (SIGTERM) stores the queue: nothing answered is lost.
- While the database cannot take samples, pushes are refused (503 + Retry-After) once the oldest queued one is
  older than the bound, instead of being answered without one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from mfumon.api.crud.nodes import read_nodes
from tests.conftest import start_server
from tests.utils.factories import metric_value, node_sample, report
from tests.utils.waiting import eventually

NODES = 40
ENV = {"MFUMON_SAMPLE_FLUSH_SECONDS": "0.5"}


def _push_all(client: httpx.Client, power: float) -> None:
    for n in range(NODES):
        body = node_sample(4, job_id=f"j{n % 5}", power_watts=power)
        for g in body["gpus"]:
            g["uuid"] = f"GPU-{n}-{g['index']}"
        assert client.post(f"/v1/nodes/n{n}/samples", json=body).status_code == 200


def _powers(client: httpx.Client) -> dict[str, set[float]]:
    nodes = client.get("/v1/nodes").json()["data"]
    return {n["name"]: {g["counters"]["power_watts"] for g in n["gpus"]} for n in nodes}


def _queue_empty(client: httpx.Client) -> bool:
    return metric_value(client.get("/metrics").text, "mfumon_sample_queue_nodes") == 0


def test_kill_9_loses_no_report_and_no_sample_older_than_the_last_group_commit(
    database_url: str, tmp_path: Path
) -> None:
    with start_server(tmp_path, env=ENV, database_url=database_url) as server, httpx.Client(base_url=server.url) as c:
        _push_all(c, 100.0)
        assert eventually(lambda: _queue_empty(c)), "the group commit never caught up"
        _push_all(c, 200.0)
        for j in range(20):
            assert c.post(f"/v1/jobs/r{j}/reports", json=report()).status_code == 200
        assert c.post("/v1/jobs/r0/end", json={"exit_code": 3}).status_code == 200
        server.process.kill()  # SIGKILL at once: pushes answered in the last moment may not be stored
        server.process.wait()
    with start_server(tmp_path, env=ENV, database_url=database_url) as server, httpx.Client(base_url=server.url) as c:
        powers = _powers(c)
        assert sorted(powers) == sorted(f"n{n}" for n in range(NODES))
        assert all(p in ({100.0}, {200.0}) for p in powers.values()), powers  # whole samples only
        jobs = c.get("/v1/jobs").json()["data"]
        assert len(jobs) == 20 and all(j["reports_received"] == 1 for j in jobs)
        assert c.get("/v1/jobs/r0").json()["exit_code"] == 3

        _push_all(c, 300.0)
        assert eventually(lambda: _queue_empty(c)), "the group commit never caught up"
        server.process.kill()
        server.process.wait()
    with start_server(tmp_path, env=ENV, database_url=database_url) as server, httpx.Client(base_url=server.url) as c:
        assert set(map(frozenset, _powers(c).values())) == {frozenset({300.0})}


def test_graceful_stop_stores_every_answered_sample(database_url: str, tmp_path: Path) -> None:
    # Nothing would be stored before the stop without the final flush.
    slow = {"MFUMON_SAMPLE_FLUSH_SECONDS": "60", "MFUMON_SAMPLE_MAX_UNFLUSHED_SECONDS": "120"}
    with start_server(tmp_path, env=slow, database_url=database_url) as server, httpx.Client(base_url=server.url) as c:
        _push_all(c, 400.0)
        assert metric_value(c.get("/metrics").text, "mfumon_sample_queue_nodes") == NODES
    with start_server(tmp_path, env=slow, database_url=database_url) as server, httpx.Client(base_url=server.url) as c:
        assert set(map(frozenset, _powers(c).values())) == {frozenset({400.0})}


def test_pushes_are_refused_while_the_database_is_behind_the_bound(
    make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(SAMPLE_FLUSH_SECONDS=0.05, SAMPLE_MAX_UNFLUSHED_SECONDS=0.3)
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    writer = ctx.sample_writer.sessions  # the writer's own on SQLite
    working = writer.begin

    def unavailable() -> None:
        raise OperationalError("INSERT", {}, Exception("connection refused"))

    monkeypatch.setattr(writer, "begin", unavailable)
    assert client.post("/v1/nodes/a/samples", json=node_sample(2)).status_code == 200  # queued
    refused = eventually(
        lambda: (r := client.post("/v1/nodes/a/samples", json=node_sample(2))).status_code == 503 and r
    )
    assert refused, "pushes were still answered long after the database stopped taking them"
    assert int(refused.headers["Retry-After"]) > 0 and "retry" in refused.json()["detail"]
    text = client.get("/metrics").text
    assert metric_value(text, "mfumon_ingest_requests_total", endpoint="node_samples", outcome="unavailable") >= 1
    assert metric_value(text, "mfumon_sample_flush_errors_total") >= 1
    assert metric_value(text, "mfumon_sample_queue_nodes") == 1  # a's pushes are kept for the next round

    monkeypatch.setattr(writer, "begin", working)
    assert eventually(lambda: client.post("/v1/nodes/b/samples", json=node_sample(2)).status_code == 200)
    assert eventually(lambda: metric_value(client.get("/metrics").text, "mfumon_sample_queue_nodes") == 0)
    with ctx.sessions() as session:
        assert sorted(n.name for n in read_nodes(session=session)) == ["a", "b"]
