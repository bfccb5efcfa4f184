"""Back-to-back scrapes share one render (issue 28 #7): eight scrapers of a 10k-GPU ``/metrics`` kept two renders
running and delayed pushes by seconds; now renders are serialised and a body younger than
``MFUMON_METRICS_MAX_AGE_SECONDS`` is the answer to a scrape of the same shard."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from fastapi.testclient import TestClient

from mfumon.api.metrics.scrapes import MAX_BODIES, ScrapeCache
from tests.utils.factories import metric_value, node_sample


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_body_is_reused_within_its_age_then_rendered_again() -> None:
    clock = _Clock()
    cache = ScrapeCache(1.0, clock)
    renders = iter([b"a", b"b", b"c", b"d"])
    assert cache.body("k", lambda: next(renders)) == b"a"
    clock.now += 1.0
    assert cache.body("k", lambda: next(renders)) == b"a"  # within max age (inclusive)
    assert cache.body("other", lambda: next(renders)) == b"b"  # another shard or encoding: its own body
    clock.now += 0.01
    assert cache.body("k", lambda: next(renders)) == b"c"
    assert cache.counts() == {"rendered": 3, "reused": 1}


def test_max_age_zero_renders_every_scrape_and_keeps_nothing() -> None:
    cache = ScrapeCache(0.0, _Clock())
    assert [cache.body("k", lambda: b"x") for _ in range(3)] == [b"x"] * 3
    assert cache.counts() == {"rendered": 3, "reused": 0}


def test_bodies_kept_are_bounded() -> None:
    clock = _Clock()
    cache = ScrapeCache(10.0, clock)
    for shard in range(MAX_BODIES * 3):
        cache.body((shard, 4096), lambda: b"x" * 100)
    assert len(cache._bodies) == MAX_BODIES
    cache.body((MAX_BODIES * 3 - 1, 4096), lambda: b"new")  # the newest is still held
    assert cache.counts()["reused"] == 1


def test_concurrent_scrapes_wait_for_one_render() -> None:
    cache = ScrapeCache(5.0)
    inside = 0
    most_inside = 0
    lock = threading.Lock()

    def slow_render() -> bytes:
        nonlocal inside, most_inside
        with lock:
            inside += 1
            most_inside = max(most_inside, inside)
        time.sleep(0.05)
        with lock:
            inside -= 1
        return b"body"

    threads = [threading.Thread(target=cache.body, args=("k", slow_render)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most_inside == 1 and cache.counts() == {"rendered": 1, "reused": 7}


def test_the_api_answers_a_scrape_with_the_body_just_rendered(make_client: Callable[..., TestClient]) -> None:
    client = make_client(METRICS_MAX_AGE_SECONDS=30)
    assert client.post("/v1/nodes/n1/samples", json=node_sample(1)).status_code == 200
    first = client.get("/metrics").text
    assert client.post("/v1/nodes/n2/samples", json=node_sample(1)).status_code == 200
    second = client.get("/metrics").text
    assert second == first and 'node="n2"' not in second  # reused: rendered less than 30 s ago
    sharded = client.get("/metrics", params={"shard": 0, "shards": 1}).text
    assert 'node="n2"' in sharded  # another key renders afresh
    assert metric_value(sharded, "mfumon_metrics_scrapes_total", outcome="reused") == 1
    assert metric_value(sharded, "mfumon_metrics_scrapes_total", outcome="rendered") == 1  # counted before this one
