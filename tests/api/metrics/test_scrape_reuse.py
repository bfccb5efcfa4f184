"""Back-to-back scrapes share one render (issue 28 #7): eight scrapers of a 10k-GPU ``/metrics`` kept two renders
running and delayed pushes by seconds; now renders are serialised and a body younger than
``MFUMON_METRICS_MAX_AGE_SECONDS`` is the answer to a scrape of the same shard."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from mfumon.api.metrics import scrapes
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


def test_bodies_held_are_sent_one_at_a_time_and_spaced_to_a_tenth_of_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 33 #3: scrapers asking back to back take turns, and sending them bodies held takes at most a tenth of
    the time (HELD_ANSWERS_SHARE): a turn that took t keeps the next one from starting for 9t. A scrape that comes
    later than that (Prometheus, once per interval) does not wait."""
    assert scrapes.HELD_ANSWERS_SHARE == 0.1
    clock = _Clock()
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(round(seconds, 9))
        clock.now += seconds
        await real_sleep(0)

    monkeypatch.setattr(scrapes.time, "perf_counter", clock)
    monkeypatch.setattr(scrapes.asyncio, "sleep", sleep)
    pacer = scrapes.AnswerPacer()
    inside: list[int] = []
    overlaps = 0
    turns: list[tuple[float, float]] = []

    async def answer(n: int) -> None:
        nonlocal overlaps
        async with pacer.turn():
            overlaps += len(inside)
            inside.append(n)
            started = clock.now
            clock.now += 0.002  # sending the body
            await real_sleep(0)  # others get the loop meanwhile (the transport draining)
            inside.remove(n)
            turns.append((started, clock.now))

    async def run() -> None:
        await asyncio.gather(*(answer(n) for n in range(8)))
        clock.now += 1.0  # a scrape a second later: no turn before it
        await answer(8)

    asyncio.run(run())
    assert overlaps == 0
    assert waits == [0.018] * 7  # each of the 7 after the first waited 9x the 2 ms turn before it; the last, none
    gaps = [later[0] - earlier[1] for earlier, later in itertools.pairwise(turns)]
    assert gaps[:7] == pytest.approx([0.018] * 7) and gaps[7] == pytest.approx(1.0)


def test_a_client_that_stops_reading_holds_up_the_others_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer stuck on a client that stops reading (until the write timeout) keeps its turn; the next answer goes
    on after MAX_TURN_WAIT_S without it, and the stuck one counts at most MAX_TURN_COUNTED_S towards the pause."""
    monkeypatch.setattr(scrapes, "MAX_TURN_WAIT_S", 0.05)
    pacer = scrapes.AnswerPacer()
    order: list[str] = []

    async def run() -> None:
        release = asyncio.Event()

        async def stuck() -> None:
            async with pacer.turn():
                order.append("stuck sending")
                await release.wait()
            order.append("stuck done")

        async def next_one() -> None:
            async with pacer.turn():
                order.append("next sent")

        first = asyncio.create_task(stuck())
        await asyncio.sleep(0)
        await next_one()
        release.set()
        await first

    asyncio.run(asyncio.wait_for(run(), 10))  # without the bound, the next answer waits for the stuck one forever
    assert order == ["stuck sending", "next sent", "stuck done"]
