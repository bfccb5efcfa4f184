"""The step accumulator: interval boundaries at step() calls, warm-up, stalls, rates from log lines."""

from __future__ import annotations

import threading

import pytest

from mfumon.exporter.job.reporter._window import StepWindow


class Clock:
    """A clock the test moves by hand (the window takes its clock as an argument)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_nothing_to_report_before_any_step(clock: Clock) -> None:
    assert StepWindow(clock).take(stall_after_seconds=1.0) is None


def test_first_step_without_duration_only_starts_the_clock(clock: Clock) -> None:
    window = StepWindow(clock)
    window.add(1000)  # warm-up: its tokens and time are not counted
    assert window.take() is None
    clock.now += 2.0
    window.add(500)
    clock.now += 2.0
    window.add(500)
    clock.now += 7.0  # the flush happens later: that idle time belongs to the next interval
    report = window.take()
    assert report == {"tokens": 1000, "interval_seconds": 4.0, "step_seconds": 2.0, "step": 3}


def test_first_step_with_duration_counts(clock: Clock) -> None:
    window = StepWindow(clock)
    window.add(300, step_seconds=1.5)
    report = window.take()
    assert report is not None
    assert (report["tokens"], report["interval_seconds"], report["step_seconds"]) == (300, 1.5, 1.5)


def test_consecutive_intervals_share_a_boundary(clock: Clock) -> None:
    window = StepWindow(clock)
    window.add(0)
    for _ in range(3):
        clock.now += 1.0
        window.add(10, step_seconds=0.5, comm_seconds=0.1, data_wait_seconds=0.2)
    first = window.take()
    clock.now += 0.5  # time between the last step and the next one is in the next interval
    window.add(10, step_seconds=0.5, comm_seconds=0.3)
    second = window.take()
    assert first is not None and second is not None
    assert first["interval_seconds"] == 3.0 and first["tokens"] == 30
    assert first["step_seconds"] == 0.5
    assert first["comm_seconds"] == pytest.approx(0.1) and first["data_wait_seconds"] == pytest.approx(0.2)
    assert second == {
        "tokens": 10,
        "interval_seconds": 0.5,
        "step_seconds": 0.5,
        "comm_seconds": 0.3,
        "step": 5,
    }


def test_a_step_longer_than_the_flush_period_is_not_split(clock: Clock) -> None:
    window = StepWindow(clock)
    window.add(0)
    clock.now += 20.0
    assert window.take(stall_after_seconds=60.0) is None  # still inside a 30 s step: no 0 tokens/s report
    clock.now += 10.0
    window.add(3000)
    report = window.take(stall_after_seconds=60.0)
    assert report is not None and report["tokens"] / report["interval_seconds"] == 100.0


def test_stalled_job_reports_zero_without_moving_the_boundary(clock: Clock) -> None:
    window = StepWindow(clock)
    window.add(0)
    clock.now += 1.0
    window.add(100)
    window.take()
    clock.now += 61.0
    assert window.take(stall_after_seconds=60.0) == {"tokens": 0, "interval_seconds": 61.0}
    clock.now += 1.0
    window.add(100)  # the step that finally completes is counted over its whole duration
    report = window.take(stall_after_seconds=60.0)
    assert report is not None and report["interval_seconds"] == 62.0


def test_rates_are_averaged_per_source_and_summed_across_sources(clock: Clock) -> None:
    window = StepWindow(clock)
    window.add_rate(100.0, source="engine0")
    window.add_rate(300.0, source="engine0", step_seconds=0.2, step=7)
    window.add_rate(50.0, source="engine1")
    report = window.take()
    assert report == {"tokens_per_second": 250.0, "step_seconds": 0.2, "step": 7}
    assert window.take() is None  # consumed


def test_zero_rate_becomes_zero_tokens_over_the_interval(clock: Clock) -> None:
    window = StepWindow(clock)
    clock.now += 5.0
    window.add_rate(0.0)
    assert window.take() == {"tokens": 0, "interval_seconds": 5.0}


def test_concurrent_steps_lose_nothing() -> None:
    window = StepWindow()
    window.add(0)
    threads = [threading.Thread(target=lambda: [window.add(1) for _ in range(20_000)]) for _ in range(4)]
    taken = 0
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        report = window.take()
        taken += report["tokens"] if report else 0
    report = window.take()
    taken += report["tokens"] if report else 0
    assert taken == 80_000


def test_times_from_log_lines_join_the_rates_of_their_interval(clock: Clock) -> None:
    window = StepWindow(clock)
    window.add_rate(None, comm_seconds=0.2, data_wait_seconds=0.01)  # a timers table before any rate
    assert window.take() is None  # times alone are no report; they wait for a rate
    window.add_rate(1000.0, step_seconds=1.0, step=10)
    window.add_rate(3000.0, step_seconds=1.2, comm_seconds=0.1, data_wait_seconds=0.03, step=20)
    report = window.take()
    assert report == pytest.approx(
        {"tokens_per_second": 2000.0, "step_seconds": 1.1, "comm_seconds": 0.15, "data_wait_seconds": 0.02, "step": 20}
    )
    window.add_rate(500.0)
    assert window.take() == {"tokens_per_second": 500.0, "step": 20}  # the times were spent with their interval
