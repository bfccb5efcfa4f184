"""Concurrent writes through a real server, on SQLite and PostgreSQL: no 5xx, no lost count, no step back in time.

Each test fires its requests from many threads at once against ``mfumon serve``, then checks what the API and the
database hold. Where the database is read, it is polled with a generous deadline: node samples are stored by the
group commit a moment after they are answered.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from mfumon.api.crud.nodes import decode_sample
from tests.conftest import LiveServer, start_server
from tests.utils.factories import node_sample, report
from tests.utils.waiting import eventually

THREADS = 32


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    with start_server(tmp_path, database_url=database_url, env={"MFUMON_SAMPLE_FLUSH_SECONDS": "0.2"}) as live:
        yield live


def _all_at_once(calls: list[Callable[[httpx.Client], httpx.Response]], url: str) -> list[httpx.Response]:
    with httpx.Client(base_url=url, timeout=60) as client, ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(lambda call: call(client), calls))


def _query(database_url: str, sql: str) -> list[Any]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        engine.dispose()


def test_concurrent_first_reports_never_fail_and_never_lose_a_count(server: LiveServer) -> None:
    jobs, per_job = 50, 4
    calls = [
        (lambda c, j=j: c.post(f"/v1/jobs/new-{j}/reports", json=report(team=f"t{j % 3}")))
        for j in range(jobs)
        for _ in range(per_job)
    ]
    random.Random(7).shuffle(calls)
    statuses = [r.status_code for r in _all_at_once(calls, server.url)]
    assert statuses == [200] * (jobs * per_job)
    with httpx.Client(base_url=server.url) as client:
        for j in range(jobs):
            job = client.get(f"/v1/jobs/new-{j}", params={"history": 10}).json()
            assert job["reports_received"] == per_job and len(job["history"]) == per_job, job["job_id"]
    rows = _query(server.database_url, "SELECT reports_received, count(*) FROM jobs GROUP BY reports_received")
    assert [tuple(r) for r in rows] == [(per_job, jobs)]


def test_concurrent_registrations_and_ends_never_fail(server: LiveServer) -> None:
    calls: list[Callable[[httpx.Client], httpx.Response]] = []
    for j in range(40):
        calls.append(lambda c, j=j: c.put(f"/v1/jobs/reg-{j}", json={"gpus_requested": 8, "team": "a"}))
        calls.append(lambda c, j=j: c.put(f"/v1/jobs/reg-{j}", json={"gpus_requested": 16, "pool": "p"}))
        calls.append(lambda c, j=j: c.post(f"/v1/jobs/reg-{j}/reports", json=report()))
    random.Random(3).shuffle(calls)
    assert {r.status_code for r in _all_at_once(calls, server.url)} == {200}
    ends = [(lambda c, j=j: c.post(f"/v1/jobs/reg-{j}/end", json={"exit_code": 0})) for j in range(40) for _ in "ab"]
    assert {r.status_code for r in _all_at_once(ends, server.url)} == {200}
    listing = httpx.get(f"{server.url}/v1/jobs", params={"status": "ended"}).json()
    assert listing["count"] == 40
    assert {(j["team"], j["pool"], j["reports_received"]) for j in listing["data"]} == {("a", "p", 1)}


def test_concurrent_first_pushes_never_fail_and_every_push_counts(server: LiveServer) -> None:
    nodes, per_node = 50, 4
    base = time.time() - 100  # in the past: a sample dated after its arrival counts as arrived then
    calls = []
    for n in range(nodes):
        for k in range(per_node):
            body = node_sample(2, job_id=f"j{n}")
            body["timestamp"] = base + k
            for g in body["gpus"]:
                g["uuid"] = f"GPU-{n}-{g['index']}"
            calls.append(lambda c, n=n, body=body: c.post(f"/v1/nodes/new-{n}/samples", json=body))
    random.Random(11).shuffle(calls)
    assert {r.status_code for r in _all_at_once(calls, server.url)} == {200}
    listing = httpx.get(f"{server.url}/v1/nodes").json()
    assert listing["count"] == nodes
    assert {(n["samples_received"], n["last_timestamp"]) for n in listing["data"]} == {(per_node, base + 3)}

    def stored() -> list[Any]:
        rows = _query(server.database_url, "SELECT samples_received, last_sample_timestamp FROM nodes")
        return rows if len(rows) == nodes and all(r[0] == per_node for r in rows) else []

    rows = eventually(stored)
    assert rows and {r[1] for r in rows} == {base + 3}


def test_an_older_push_never_overwrites_a_newer_one(server: LiveServer) -> None:
    """Forty pushes of one node, each with its own timestamp and power, arrive in random order at once."""
    base = time.time() - 100  # in the past: a sample dated after its arrival counts as arrived then
    bodies = []
    for k in range(40):
        body = node_sample(2, power_watts=100.0 + k)
        body["timestamp"] = base + k
        bodies.append(body)
    random.Random(5).shuffle(bodies)
    calls = [(lambda c, body=body: c.post("/v1/nodes/contested/samples", json=body)) for body in bodies]
    assert {r.status_code for r in _all_at_once(calls, server.url)} == {200}
    node = httpx.get(f"{server.url}/v1/nodes/contested").json()
    assert node["last_timestamp"] == base + 39 and node["samples_received"] == 40
    assert [g["counters"]["power_watts"] for g in node["gpus"]] == [139.0, 139.0]

    def stored() -> Any:
        rows = _query(server.database_url, "SELECT sample, last_sample_timestamp, samples_received FROM nodes")
        return rows[0] if rows and rows[0][2] == 40 else None

    row = eventually(stored)
    assert row is not None and row[1] == base + 39
    assert [g.power_watts for g in decode_sample(row[0]).gpus] == [139.0, 139.0]
