"""The aggregator's clock, moved by the test (an app's ``ctx.clock``; several apps may share one)."""

from __future__ import annotations

from typing import Any


class Clock:
    def __init__(self, *clients: Any, start: float = 1.8e9) -> None:
        self.now = start
        for client in clients:
            self.drive(client)

    def drive(self, client: Any) -> None:
        client.app.state.ctx.clock = lambda: self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
