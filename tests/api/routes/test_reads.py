"""Reads are paged and cannot starve ingest (issue 10 #7).

``GET /v1/jobs?limit=10000`` returned 8.7 MB in 1.5 s, and four such loops pushed ingest p99 to 631 ms. Pages are
capped, deep pages use a cursor (an index seek, not an offset scan), and reads wait for one of a few slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.middleware import ReadLimit
from tests.utils.factories import node_sample, report


def _walk(client: TestClient, path: str, **params: Any) -> list[list[str]]:
    """Every page of a list, following next_cursor; the keys on each page."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        response = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        body = response.json()
        keys = [item.get("job_id") or item["name"] for item in body["data"]]
        assert body["count"] == len(keys)
        pages.append(keys)
        cursor = body["next_cursor"]
        if cursor is None:
            return pages


@pytest.mark.parametrize("limit", [1001, 10_000, 0])
def test_page_size_is_capped(client: TestClient, limit: int) -> None:
    for path in ("/v1/jobs", "/v1/nodes"):
        response = client.get(path, params={"limit": limit})
        assert response.status_code == 422 and response.json()["detail"][0]["field"] == "limit"


def test_jobs_page_by_cursor(client: TestClient) -> None:
    ids = [f"job-{i:04d}" for i in range(230)]
    for job_id in ids:
        assert client.put(f"/v1/jobs/{job_id}", json={"team": "t"}).status_code == 200
    pages = _walk(client, "/v1/jobs")
    assert [len(p) for p in pages] == [100, 100, 30]
    assert [k for p in pages for k in p] == ids  # each job once, in order
    pages = _walk(client, "/v1/jobs", limit=115)
    assert [len(p) for p in pages] == [115, 115, 0]  # a page that ends exactly on the last job points to an empty one
    assert _walk(client, "/v1/jobs", status="running") == [[]]


def test_nodes_page_by_cursor(client: TestClient) -> None:
    names = [f"gpu-{i:02d}" for i in range(12)]
    for name in names:
        assert client.post(f"/v1/nodes/{name}/samples", json=node_sample(1)).status_code == 200
    pages = _walk(client, "/v1/nodes", limit=5)
    assert [k for p in pages for k in p] == names and [len(p) for p in pages] == [5, 5, 2]


@pytest.mark.parametrize("cursor", ["not base64!", "AAAA", "x" * 201])
def test_a_cursor_the_api_did_not_give_is_422(client: TestClient, cursor: str) -> None:
    response = client.get("/v1/jobs", params={"cursor": cursor})
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "cursor"


def test_history_and_offset_are_capped(client: TestClient) -> None:
    client.post("/v1/jobs/j/reports", json=report())
    assert client.get("/v1/jobs/j", params={"history": 1000}).status_code == 200
    assert client.get("/v1/jobs/j", params={"history": 1001}).status_code == 422
    assert client.get("/v1/jobs", params={"offset": 10_001}).status_code == 422


def _request(app: Any, path: str) -> tuple[Callable[[], Awaitable[None]], dict[str, Any]]:
    """One GET through an ASGI app: the coroutine function that runs it, and where its status and headers land."""
    result: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            result["status"] = message["status"]
            result["headers"] = dict(message["headers"])

    async def run() -> None:
        await app({"type": "http", "method": "GET", "path": path, "headers": []}, receive, send)

    return run, result


def test_reads_wait_for_a_slot_and_are_shed_when_none_frees() -> None:
    release = asyncio.Event()
    computing: list[str] = []

    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        computing.append(scope["path"])
        if scope["path"] == "/v1/jobs":
            await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    rejected: list[str] = []
    limit = ReadLimit(slow_app, max_concurrent=2, wait_seconds=0.2, on_rejected=rejected.append)

    async def scenario() -> dict[str, Any]:
        runs = {name: _request(limit, path) for name, path in
                [("a", "/v1/jobs"), ("b", "/v1/jobs"), ("c", "/v1/jobs"), ("metrics", "/metrics"),
                 ("health", "/healthz")]}  # fmt: skip
        tasks = {name: asyncio.ensure_future(run()) for name, (run, _) in runs.items()}
        # a and b hold both slots until released; c gives up after 0.2 s; scrapes and probes do not queue at all.
        await asyncio.wait_for(asyncio.gather(tasks["c"], tasks["metrics"], tasks["health"]), 60)
        held = {name for name in ("a", "b") if not tasks[name].done()}
        release.set()
        await asyncio.gather(*tasks.values())
        return {"held": held, **{name: result for name, (_, result) in runs.items()}}

    out = asyncio.run(scenario())
    assert out["held"] == {"a", "b"}
    assert out["c"]["status"] == 503 and out["c"]["headers"][b"retry-after"] == b"1"
    assert out["a"]["status"] == out["b"]["status"] == out["metrics"]["status"] == 200
    assert rejected == ["api"] and computing.count("/v1/jobs") == 2


def test_a_slot_is_freed_once_the_answer_is_computed() -> None:
    """A slow download must not hold a slot: the slot goes back at the response start."""
    stall = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await stall.wait()  # the client reads slowly: the body is still going out
        await send({"type": "http.response.body", "body": b"{}"})

    limit = ReadLimit(app, max_concurrent=1, wait_seconds=0.2)

    async def scenario() -> int:
        slow, _ = _request(limit, "/v1/jobs")
        first = asyncio.ensure_future(slow())
        await asyncio.sleep(0.05)
        second_run, second = _request(limit, "/v1/jobs")
        second_task = asyncio.ensure_future(second_run())
        while "status" not in second:  # the first is still sending its body: its slot is free already
            await asyncio.sleep(0.01)
        status = second["status"]
        stall.set()
        await asyncio.gather(first, second_task)
        return int(status)

    assert asyncio.run(scenario()) == 200
