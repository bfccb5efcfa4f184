"""Polling with a deadline: how tests wait for what happens a moment later (group commits, other replicas)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout_seconds: float = 60.0, interval_seconds: float = 0.1) -> T:
    """Call ``check`` until it returns something true or the deadline passes; returns its last value.

    The deadline is generous on purpose: it bounds a hung test, it does not assert a duration.
    """
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval_seconds)
