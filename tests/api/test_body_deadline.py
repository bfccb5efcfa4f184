"""``BodyTimeout``'s wait for a body message (``mfumon.api.middleware._in_time``): a message already there is taken
without a timer; one that comes later, within the deadline, as before; none, a timeout; a cancellation from outside
goes through; the server's waiter is left clean each time."""

from __future__ import annotations

import asyncio
import time

import pytest
from starlette.types import Message

from mfumon.api.middleware import _in_time

BODY: Message = {"type": "http.request", "body": b"x", "more_body": False}


class Server:
    """A receive() that waits for the body the way uvicorn's does (an event)."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()

    async def receive(self) -> Message:
        await self.arrived.wait()
        return BODY

    def waiters(self) -> int:
        return len(self.arrived._waiters)  # type: ignore[attr-defined]


def test_a_message_already_there_arms_no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> Message:
        server = Server()
        server.arrived.set()
        monkeypatch.setattr(asyncio, "timeout", None)  # would fail if a deadline were armed
        return await _in_time(server.receive, 1.0)

    assert asyncio.run(run()) == BODY


def test_a_message_within_the_deadline_a_timeout_past_it_and_a_cancellation() -> None:
    async def run() -> None:
        server = Server()
        asyncio.get_running_loop().call_later(0.05, server.arrived.set)
        assert await _in_time(server.receive, 5.0) == BODY
        server.arrived.clear()
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await _in_time(server.receive, 0.1)
        assert 0.09 < time.monotonic() - started < 1.0 and server.waiters() == 0
        waiting = asyncio.ensure_future(_in_time(server.receive, 10.0))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert server.waiters() == 0
        future = asyncio.get_running_loop().create_future()  # an ASGI receive may return any awaitable
        asyncio.get_running_loop().call_later(0.01, future.set_result, BODY)
        assert await _in_time(lambda: future, 1.0) == BODY

    asyncio.run(run())
