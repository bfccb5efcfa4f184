"""Scrapes that come back to back share one render: a body rendered moments ago is the answer.

A ``/metrics`` render at 10,000 GPUs is tens of milliseconds of Python on a worker thread, competing with the event
loop for the GIL. Eight scrapers asking back to back kept two renders running all the time: the loop had a third of
the GIL, pushes waited in the kernel's socket buffers (where no queue bound sees them) and p99 reached 3.4-4.3 s on
SQLite. Here renders are serialised (one at a time, whatever the scrapers), and a scrape of the same shard and
encoding within ``max_age_s`` of the last render gets that body, so any number of scrapers costs at most one render
a ``max_age_s`` per shard. Prometheus scrapes every 10-60 s from pushes every 10 s: a body up to a second old is
news to it. ``max_age_s`` 0 renders every scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable

MAX_BODIES = 64  # distinct (shard, shards, encoding) kept: a reader cannot fill memory with shard combinations
#: The most of the time that sending bodies held to back-to-back scrapes may take (AnswerPacer): the rest is ingest's.
HELD_ANSWERS_SHARE = 0.1
#: Bounds that keep a client which stops reading (its answer waits on the socket until WRITE_TIMEOUT_SECONDS) from
#: holding up everyone else's answers: no answer waits longer for its turn, and no turn counts longer for the pause.
MAX_TURN_WAIT_S = 1.0
MAX_TURN_COUNTED_S = 0.1


class ScrapeCache:
    """The last body per scrape key, reused while younger than ``max_age_s``; counts of renders and reuses."""

    def __init__(self, max_age_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._render_lock = threading.Lock()  # one render at a time: the GIL is shared with the event loop
        self._bodies: OrderedDict[Hashable, tuple[float, bytes]] = OrderedDict()
        self._count_lock = threading.Lock()  # for the counts: the event loop counts too (held)
        self.pacer = AnswerPacer()  # sends the bodies held
        self.rendered = 0
        self.reused = 0

    def held(self, key: Hashable) -> bytes | None:
        """The body held for ``key`` if rendered within ``max_age_s`` (counted as reused), else None; never waits
        for a render, so the event loop can ask without a worker thread."""
        held = self._bodies.get(key)  # one dict read: atomic beside a render storing another body
        if held is None or self._clock() - held[0] > self.max_age_seconds:
            return None
        with self._count_lock:
            self.reused += 1
        return held[1]

    def body(self, key: Hashable, render: Callable[[], bytes]) -> bytes:
        """The body for ``key``: the one held if rendered within ``max_age_s``, else ``render()``'s."""
        with self._render_lock:
            body = self.held(key)  # rendered by the scrape this one waited for
            if body is not None:
                return body
            started = self._clock()  # the body shows the state as of now, however long it takes to render
            body = render()
            with self._count_lock:
                self.rendered += 1
            if self.max_age_seconds > 0:
                self._bodies[key] = (started, body)
                self._bodies.move_to_end(key)
                while len(self._bodies) > MAX_BODIES:
                    self._bodies.popitem(last=False)
            return body

    def counts(self) -> dict[str, int]:
        """Scrapes answered by a render and by a body held (read from the metrics thread; ints are atomic)."""
        return {"rendered": self.rendered, "reused": self.reused}


class AnswerPacer:
    """Sends the bodies held one scrape at a time, each turn keeping the next one waiting ``1/share - 1`` times as long
    as it took, so that answering back-to-back scrapes with bodies held takes at most ``share`` of the time: a
    scraper asking back to back waits its turn instead of taking the event loop from pushes.

    A body held costs no render, but sending it is the event loop's work (at 10,000 GPUs about 1 MB gzipped), and
    eight scrapers asking back to back had the loop send 1,000-2,300 a second, which raised pushes' p99 1.4-8x
    (``bench/hostile_clients.py scrapes``); paced to a quarter of the time, 1.0-3.6x; to a tenth, 0.9-2.1x.
    Prometheus asks each target once per scrape interval, so its scrapes find no turn before them and are answered
    at once. A client that stops reading holds its turn until the write timeout closes it, so no answer waits for
    its turn longer than MAX_TURN_WAIT_S. Renders need no pacing: one a ``max_age_s`` per shard at most (with
    ``max_age_s`` 0, every scrape renders, as asked).
    """

    def __init__(self, share: float = HELD_ANSWERS_SHARE) -> None:
        self._pause_per_second = 1 / share - 1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gate = asyncio.Lock()
        self._not_before = 0.0  # time.perf_counter() before which the next turn does not start

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for this answer's turn (never longer than MAX_TURN_WAIT_S), then send it."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # an event loop that has ended holds no scrape (tests run several)
            self._loop, self._gate = loop, asyncio.Lock()
        deadline = time.perf_counter() + MAX_TURN_WAIT_S
        try:  # a client that stops reading keeps its turn until the write timeout: the others go on without it
            await asyncio.wait_for(self._gate.acquire(), MAX_TURN_WAIT_S)
            gated = True
        except TimeoutError:
            gated = False
        started = time.perf_counter()
        try:
            wait = min(self._not_before, deadline) - started
            if wait > 0:
                await asyncio.sleep(wait)
            started = time.perf_counter()
            yield
        finally:
            ended = time.perf_counter()
            self._not_before = ended + min(ended - started, MAX_TURN_COUNTED_S) * self._pause_per_second
            if gated:
                self._gate.release()
