"""The stop-on-signal block every long-running command waits in."""

from __future__ import annotations

import os
import signal

import pytest

from mfumon.exporter.signals import stop_on_signals


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sets_the_event_and_the_old_handler_comes_back(signum: int) -> None:
    seen: list[int] = []

    def before(received: int, _frame: object) -> None:
        seen.append(received)

    original = signal.signal(signum, before)
    try:
        with stop_on_signals() as stop:
            assert not stop.is_set()
            os.kill(os.getpid(), signum)
            assert stop.wait(5.0)
        assert seen == []  # the block's handler took it, not the one before
        assert signal.getsignal(signum) is before
    finally:
        signal.signal(signum, original)


def test_handlers_come_back_when_the_block_raises() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RuntimeError), stop_on_signals():
        raise RuntimeError("boom")
    assert signal.getsignal(signal.SIGTERM) is before
