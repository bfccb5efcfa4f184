"""The waterfall ledger: hand-computed cases for each rule, and a property test that the parts add up exactly."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mfumon.api.accounting import CATEGORIES, STEP_CATEGORIES, Ledger, StepSplit
from mfumon.api.accounting.ledger import Bill

NO_CAP = math.inf


def _report(ledger: Ledger, now: float, gpus: int = 8, covered: float | None = 10.0, **kw: object) -> dict:
    bill = ledger.report(
        now,
        gpus=gpus,
        covered_seconds=covered,
        stalled=bool(kw.pop("stalled", False)),
        split=kw.pop("split", StepSplit()),  # type: ignore[arg-type]
        model_flops_per_second=kw.pop("mfps", None),  # type: ignore[arg-type]
        peak_flops_per_gpu=kw.pop("peak", None),  # type: ignore[arg-type]
        mfu=kw.pop("mfu", None),  # type: ignore[arg-type]
        max_gap_seconds=float(kw.pop("cap", NO_CAP)),  # type: ignore[arg-type]
    )
    return bill.gpu_seconds


def test_first_report_covers_its_interval_and_splits_the_step() -> None:
    ledger = Ledger()
    split = StepSplit(step_seconds=2.0, data_wait_seconds=0.2, comm_seconds=0.5, bubble_seconds=0.1)
    parts = _report(ledger, 1000.0, gpus=8, covered=10.0, split=split)
    assert parts == pytest.approx({"data_wait": 8.0, "comm_exposed": 20.0, "bubble": 4.0, "compute": 48.0})
    parts = _report(ledger, 1015.0, gpus=8, covered=15.0, split=split)  # 15 s since the last report
    assert sum(parts.values()) == pytest.approx(8 * 15.0)


def test_parts_larger_than_the_step_are_scaled_down_together() -> None:
    fractions = StepSplit(step_seconds=1.0, data_wait_seconds=0.9, comm_seconds=0.6).fractions()
    assert fractions == pytest.approx({"data_wait": 0.6, "comm_exposed": 0.4})


def test_events_before_the_first_report_extend_the_allocation_back() -> None:
    ledger = Ledger()
    ledger.event("init", 120.0, now=900.0)
    ledger.event("checkpoint", 30.0, now=905.0)  # still before any report: start-up phase
    parts = _report(ledger, 1000.0, gpus=4, covered=10.0)
    assert parts == pytest.approx({"init": 480.0, "checkpoint": 120.0, "compute": 40.0})


def test_an_event_inside_a_tile_is_taken_out_of_it_once() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=10.0)
    ledger.event("checkpoint", 40.0, now=1030.0)  # 30 s since the last report: only 30 s can be in this tile
    parts = _report(ledger, 1060.0, gpus=2, covered=60.0)
    assert parts == pytest.approx({"checkpoint": 60.0, "compute": 60.0})  # 30 s checkpoint + 30 s steps, x 2 GPUs


def test_zero_token_reports_and_silence_are_stalled() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=1, covered=10.0)
    assert _report(ledger, 1060.0, gpus=1, covered=60.0, stalled=True) == pytest.approx({"stalled": 60.0})
    # 100 s since the last report but the report covers 20 s of steps: beyond 1.5 x 20 s is a gap.
    assert _report(ledger, 1160.0, gpus=1, covered=20.0) == pytest.approx({"stalled": 70.0, "compute": 30.0})


def test_lost_progress_is_charged_as_it_is_redone() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=100.0)  # 200 GPU-s of progress
    ledger.checkpoint_saved()
    _report(ledger, 1050.0, gpus=2, covered=50.0)  # 100 GPU-s since the checkpoint
    ledger.failed()
    assert ledger.lost_debt == pytest.approx(100.0)
    parts = _report(ledger, 1080.0, gpus=2, covered=30.0)  # redoing: the first 100 GPU-s are lost
    assert parts == pytest.approx({"lost": 60.0})
    parts = _report(ledger, 1110.0, gpus=2, covered=30.0)
    assert parts == pytest.approx({"lost": 40.0, "compute": 20.0})
    assert ledger.lost_debt == 0


def test_flops_lifetime_compute_and_time_weighted_mfu() -> None:
    ledger = Ledger()
    ledger.event("init", 50.0, now=0.0)
    split = StepSplit(step_seconds=1.0, comm_seconds=0.5)
    # 4 GPUs of 100 FLOP/s peak; the job does 80 FLOP/s in all: MFU 0.2 over its step time.
    _report(ledger, 100.0, gpus=4, covered=50.0, split=split, mfps=80.0, peak=100.0, mfu=0.2)
    assert ledger.gpu_seconds == pytest.approx({"init": 200.0, "comm_exposed": 100.0, "compute": 100.0})
    assert ledger.model_flops == pytest.approx(80.0 * 50)
    assert ledger.peak_flops == pytest.approx(100.0 * 400)
    assert ledger.lifetime_mfu == pytest.approx(0.1)  # half the allocated time was start-up
    assert ledger.compute_mfu == pytest.approx(0.4)  # half of each step was exposed communication
    assert ledger.time_weighted_mfu == pytest.approx(0.2)
    assert ledger.goodput == pytest.approx(0.5)


def test_close_bills_pending_events_and_the_silence_until_the_end() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=10.0)
    ledger.event("checkpoint", 5.0, now=1005.0)
    bill = ledger.close(1020.0, gpus=None, max_gap_seconds=NO_CAP)
    assert bill.gpu_seconds == pytest.approx({"checkpoint": 10.0, "stalled": 30.0})
    assert ledger.accounted_until is None  # ended: a restart opens a new first tile


def test_a_silent_gap_counts_at_most_the_cap() -> None:
    ledger = Ledger()
    _report(ledger, 0.0, gpus=1, covered=10.0)
    assert _report(ledger, 10_000.0, gpus=1, covered=10.0, cap=600.0) == pytest.approx(
        {"stalled": 585.0, "compute": 15.0}
    )


def test_json_round_trip_ignores_unknown_keys() -> None:
    ledger = Ledger()
    _report(ledger, 10.0, covered=10.0, split=StepSplit(step_seconds=2.0))
    stored = {**ledger.to_json(), "failure_pending": True, "step_mark": 7}
    assert Ledger.from_json(stored) == ledger


def test_step_time_deviation() -> None:
    ledger = Ledger(recent_step_seconds=[1.0, 1.0, 1.0, 1.0, 2.0])
    assert ledger.step_time_deviation == pytest.approx(0.2)
    assert Ledger(recent_step_seconds=[1.0, 1.0]).step_time_deviation is None


# -- boundaries (issue 36): where a plausible change to the ledger would move a number -----------------------------


def test_an_absent_part_of_the_step_counts_as_zero() -> None:
    assert StepSplit(step_seconds=2.0, data_wait_seconds=0.5).fractions() == {"data_wait": 0.25}
    assert StepSplit(step_seconds=None, comm_seconds=1.0).fractions() == {}


def test_a_bill_is_truthy_when_it_charges_anything() -> None:
    assert not Bill()
    assert not Bill(model_flops=0.0)
    assert Bill(model_flops=0.5)
    assert Bill(gpu_seconds={"compute": 1.0})
    bill = Bill()
    bill.add("compute", 0.0)
    bill.add("stalled", -1.0)
    assert bill.gpu_seconds == {}
    bill.add("compute", 0.5)
    bill.add("compute", 2.0)
    bill.add("lost", 1.0)
    assert bill.gpu_seconds == {"compute": 2.5, "lost": 1.0}
    assert bill.total == 3.5


def test_events_before_the_first_report_add_up_per_category() -> None:
    ledger = Ledger()
    ledger.event("init", 0.5, now=0.0)
    ledger.event("init", 2.0, now=1.0)
    ledger.event("checkpoint", 3.0, now=2.0)
    assert (ledger.pending_seconds, ledger.prepaid_seconds) == ({"init": 2.5, "checkpoint": 3.0}, 0.0)
    assert _report(ledger, 10.0, gpus=2, covered=None) == {"init": 5.0, "checkpoint": 6.0}
    assert ledger.pending_seconds == {}
    ledger.event("eval", 1.0, now=12.0)
    assert ledger.pending_seconds == {"eval": 1.0}


def test_a_first_report_without_an_interval_bills_no_time() -> None:
    ledger = Ledger()
    assert _report(ledger, 10.0, gpus=2, covered=None, peak=100.0, mfps=50.0, mfu=0.5) == {}
    assert (ledger.accounted_until, ledger.model_flops, ledger.peak_flops, ledger.mfu_covered_seconds) == (
        10.0,
        0.0,
        0.0,
        0.0,
    )


def test_close_bills_pending_events_with_the_gpus_it_is_given() -> None:
    ledger = Ledger()
    ledger.event("init", 10.0, now=0.0)
    assert ledger.close(5.0, gpus=None).gpu_seconds == {}  # no GPU count yet: the events wait
    assert ledger.pending_seconds == {"init": 10.0}
    assert ledger.close(6.0, gpus=4).gpu_seconds == {"init": 40.0}
    assert (ledger.gpus, ledger.pending_seconds) == (4, {})


def test_close_keeps_the_gpu_count_of_the_reports() -> None:
    ledger = Ledger()
    _report(ledger, 0.0, gpus=8, covered=10.0)
    assert ledger.close(10.0, gpus=4, max_gap_seconds=NO_CAP).gpu_seconds == {"stalled": 80.0}
    assert ledger.gpus == 8


def test_close_right_after_a_report_or_twice_bills_nothing_more() -> None:
    ledger = Ledger()
    _report(ledger, 100.0, gpus=2, covered=10.0)
    assert ledger.close(100.0, gpus=None, max_gap_seconds=NO_CAP).gpu_seconds == {}
    assert ledger.close(200.0, gpus=None, max_gap_seconds=NO_CAP).gpu_seconds == {}  # already closed
    skewed = Ledger()
    _report(skewed, 100.0, gpus=2, covered=10.0)
    assert skewed.close(99.0, gpus=None, max_gap_seconds=NO_CAP).gpu_seconds == {}  # a clock that went back


def test_events_of_no_time_or_no_room_change_nothing() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=10.0)
    ledger.event("checkpoint", 0.0, now=1010.0)
    ledger.event("checkpoint", -5.0, now=1010.0)
    ledger.event("checkpoint", None, now=1010.0)
    ledger.event("checkpoint", 40.0, now=1000.0)  # no time has passed since the report: no room for it
    assert (ledger.pending_seconds, ledger.prepaid_seconds) == ({}, 0.0)


def test_events_in_one_tile_share_the_time_since_the_report() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=10.0)
    ledger.event("checkpoint", 20.0, now=1030.0)
    ledger.event("eval", 20.0, now=1030.0)  # only 30 - 20 = 10 s are left in the tile
    assert (ledger.pending_seconds, ledger.prepaid_seconds) == ({"checkpoint": 20.0, "eval": 10.0}, 30.0)


def test_two_failures_without_a_checkpoint_charge_each_loss_once() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=50.0)  # 100 GPU-s of progress, never checkpointed
    _report(ledger, 1050.0, gpus=2, covered=50.0)  # 100 more: 200 since the (absent) checkpoint
    assert ledger.progress_since_checkpoint == 200.0
    ledger.failed()
    assert (ledger.lost_debt, ledger.progress_since_checkpoint) == (200.0, 0.0)
    assert _report(ledger, 1080.0, gpus=2, covered=30.0) == {"lost": 60.0}  # 60 of the 200 redone
    ledger.failed()  # the 60 GPU-s just redone are lost again, once: 140 + 60
    assert (ledger.lost_debt, ledger.progress_since_checkpoint) == (200.0, 0.0)
    assert _report(ledger, 1180.0, gpus=2, covered=100.0) == {"lost": 200.0}
    assert _report(ledger, 1190.0, gpus=2, covered=10.0) == {"compute": 20.0}
    assert ledger.gpu_seconds == {"compute": 220.0, "lost": 260.0}


def test_peak_flop_seconds_cover_stalled_and_closing_tiles() -> None:
    # Lifetime MFU's denominator is every allocated GPU-second at the peak: step time, stalls, events and the
    # silence a close bills, so peak_flops = 100 FLOP/s x the waterfall's total.
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=10.0, peak=100.0, mfps=50.0)  # 20 GPU-s of compute
    assert _report(ledger, 1010.0, gpus=2, covered=10.0, stalled=True, peak=100.0) == {"stalled": 20.0}
    assert ledger.peak_flops == 100.0 * 40.0
    ledger.event("checkpoint", 4.0, now=1015.0)  # prepaid: billed at close, taken out of the closing tile
    bill = ledger.close(1020.0, gpus=None, max_gap_seconds=NO_CAP)
    assert bill.gpu_seconds == {"checkpoint": 8.0, "stalled": 12.0}
    assert bill.peak_flops == 100.0 * 20.0
    assert ledger.peak_flops == 100.0 * 60.0 == 100.0 * ledger.total_gpu_seconds
    assert ledger.compute_peak_flops == 100.0 * 20.0
    assert ledger.lifetime_mfu == (50.0 * 10.0) / (100.0 * 60.0)
    assert (ledger.prepaid_seconds, ledger.accounted_until) == (0.0, None)  # a restart's first tile is all its own


def test_peak_flop_seconds_of_a_tile_with_an_event_inside() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=10.0, peak=100.0)
    ledger.event("eval", 5.0, now=1010.0)
    parts = _report(ledger, 1020.0, gpus=2, covered=10.0, peak=100.0)
    # eval: 5 s x 2 GPUs; compute: the 20 s tile less the 5 s the event took, x 2 GPUs.
    assert parts == {"eval": 10.0, "compute": 30.0}
    assert ledger.peak_flops == 100.0 * ledger.total_gpu_seconds == 100.0 * 60.0
    assert ledger.compute_peak_flops == 100.0 * 50.0
    assert ledger.prepaid_seconds == 0.0  # the event's time was taken out once: the next tile is all steps
    assert _report(ledger, 1030.0, gpus=2, covered=10.0, peak=100.0) == {"compute": 20.0}


def test_close_caps_the_silence_at_the_last_reports_gap() -> None:
    ledger = Ledger()
    _report(ledger, 0.0, gpus=1, covered=10.0, cap=600.0)
    assert ledger.max_gap_seconds == 600.0
    assert ledger.close(10_000.0, gpus=None).gpu_seconds == {"stalled": 600.0}


def test_close_with_its_own_cap() -> None:
    ledger = Ledger()
    _report(ledger, 0.0, gpus=1, covered=10.0, cap=600.0)
    assert ledger.close(10_000.0, gpus=None, max_gap_seconds=60.0).gpu_seconds == {"stalled": 60.0}


def test_model_flops_and_mfu_cover_the_interval_the_report_measured() -> None:
    # 15 s since the last report, 10 s measured (within 1.5 x): 15 s of step time, 10 s of model FLOPs and MFU.
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=1, covered=10.0, peak=100.0, mfps=40.0, mfu=0.4)
    _report(ledger, 1015.0, gpus=1, covered=10.0, peak=100.0, mfps=20.0, mfu=0.2)
    assert ledger.gpu_seconds == {"compute": 25.0}
    assert ledger.model_flops == 40.0 * 10.0 + 20.0 * 10.0
    assert (ledger.mfu_seconds, ledger.mfu_covered_seconds) == (0.4 * 10.0 + 0.2 * 10.0, 20.0)
    assert ledger.time_weighted_mfu == (0.4 * 10.0 + 0.2 * 10.0) / 20.0
    assert ledger.peak_flops == 100.0 * 25.0


def test_without_a_measured_interval_the_tile_is_what_ran() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=1, covered=10.0)
    _report(ledger, 1000.5, gpus=1, covered=None, peak=100.0, mfps=40.0, mfu=0.4)  # half a GPU-second
    assert ledger.model_flops == 40.0 * 0.5
    assert (ledger.mfu_seconds, ledger.mfu_covered_seconds) == (0.4 * 0.5, 0.5)


def test_work_redone_after_a_failure_is_not_model_flops() -> None:
    ledger = Ledger()
    _report(ledger, 1000.0, gpus=2, covered=10.0)
    ledger.failed()  # 20 GPU-s lost
    _report(ledger, 1040.0, gpus=2, covered=40.0, peak=100.0, mfps=10.0)  # 80 GPU-s: 20 redone, 60 new
    assert ledger.gpu_seconds == {"compute": 80.0, "lost": 20.0}
    assert ledger.model_flops == 10.0 * 40.0 * (60.0 / 80.0)


def test_the_waterfall_lists_every_category_in_order() -> None:
    ledger = Ledger(gpu_seconds={"lost": 3.0, "compute": 5.0})
    assert ledger.waterfall() == [
        ("init", 0.0),
        ("checkpoint", 0.0),
        ("eval", 0.0),
        ("lost", 3.0),
        ("stalled", 0.0),
        ("data_wait", 0.0),
        ("comm_exposed", 0.0),
        ("bubble", 0.0),
        ("compute", 5.0),
    ]


def test_step_time_deviation_of_an_even_number_of_steps() -> None:
    # sorted 1, 2, 4, 5: median (2 + 4) / 2 = 3; deviations 2 + 1 + 1 + 2 = 6; 6 / 4 / 3 = 0.5
    assert Ledger(recent_step_seconds=[5.0, 1.0, 4.0, 2.0]).step_time_deviation == 0.5
    # three steps are enough: median 2, deviations 1 + 0 + 4 = 5
    assert Ledger(recent_step_seconds=[6.0, 1.0, 2.0]).step_time_deviation == 5 / 3 / 2
    assert Ledger(recent_step_seconds=[0.0, 0.0, 0.0]).step_time_deviation is None


def test_step_time_deviation_looks_at_the_ten_latest_reports() -> None:
    ledger = Ledger()
    for i in range(12):
        _report(ledger, 1000.0 + i, gpus=1, covered=1.0, split=StepSplit(step_seconds=float(i + 1)))
    assert ledger.recent_step_seconds == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    # median (7 + 8) / 2 = 7.5; deviations 4.5 + 3.5 + 2.5 + 1.5 + 0.5 (twice) = 25; 25 / 10 / 7.5
    assert ledger.step_time_deviation == 25 / 10 / 7.5


# -- the parts always add up --------------------------------------------------------------------------------

_seconds = st.floats(min_value=0.0, max_value=500.0, allow_nan=False)
_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("report"),
            _seconds,
            st.integers(1, 64),
            st.one_of(st.none(), st.floats(0.01, 300.0)),
            st.booleans(),
            st.tuples(_seconds, _seconds, _seconds, _seconds),
        ),
        st.tuples(st.just("event"), _seconds, st.sampled_from(["init", "checkpoint", "eval", "stalled"]), _seconds),
        st.tuples(st.just("checkpoint"), _seconds),
        st.tuples(st.just("fail"), _seconds),
        st.tuples(st.just("close"), _seconds, st.one_of(st.none(), st.integers(1, 64))),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_ops)
def test_categories_add_up_to_the_allocated_gpu_seconds(ops: list[tuple]) -> None:
    """Σ categories = Σ (GPUs x tile) + events before accounting started x the GPUs they are billed with."""
    ledger = Ledger()
    now = 0.0
    allocated = 0.0
    before_accounting = 0.0  # event seconds that extend the allocation back, not yet billed
    lost_possible = 0.0
    for op in ops:
        now += op[1]
        if op[0] == "report":
            _, _, gpus, covered, stalled, (step, wait, comm, bubble) = op
            tile = (covered or 0.0) if ledger.accounted_until is None else now - ledger.accounted_until
            allocated += gpus * (tile + before_accounting)
            before_accounting = 0.0
            split = StepSplit(step_seconds=step, data_wait_seconds=wait, comm_seconds=comm, bubble_seconds=bubble)
            _report(ledger, now, gpus=gpus, covered=covered, stalled=stalled, split=split, mfps=1e3, peak=1e3)
        elif op[0] == "event":
            if ledger.accounted_until is None:
                before_accounting += op[3]
            ledger.event(op[2], op[3], now)
        elif op[0] == "checkpoint":
            ledger.checkpoint_saved()
        elif op[0] == "fail":
            lost_possible += ledger.progress_since_checkpoint
            ledger.failed()
        else:
            gpus = ledger.gpus or op[2]
            if gpus:
                tile = 0.0 if ledger.accounted_until is None else now - ledger.accounted_until
                allocated += gpus * (tile + before_accounting)
                before_accounting = 0.0
            ledger.close(now, gpus=op[2], max_gap_seconds=NO_CAP)
    assert all(value >= 0 for value in ledger.gpu_seconds.values())
    assert set(ledger.gpu_seconds) <= set(CATEGORIES)
    assert ledger.total_gpu_seconds == pytest.approx(allocated, rel=1e-9, abs=1e-6)
    assert ledger.gpu_seconds.get("lost", 0.0) <= lost_possible + 1e-6
    goodput = ledger.goodput
    if goodput is not None:
        steps = sum(ledger.gpu_seconds.get(c, 0.0) for c in STEP_CATEGORIES)
        assert 0.0 <= goodput <= 1.0 + 1e-12 and goodput == pytest.approx(steps / ledger.total_gpu_seconds)


def test_serving_split_accumulates_by_category_and_survives_storage() -> None:
    """A serving job's tiles, split by serving category, add up per category; the JSON round trip keeps them."""
    ledger = Ledger()
    ledger.add_serving({"prefill": 16.0, "decode": 48.0})
    ledger.add_serving({"decode": 2.0, "idle": 80.0})
    assert ledger.serving_gpu_seconds == {"prefill": 16.0, "decode": 50.0, "idle": 80.0}
    assert Ledger.from_json(ledger.to_json()).serving_gpu_seconds == {"prefill": 16.0, "decode": 50.0, "idle": 80.0}
    assert Ledger().serving_gpu_seconds == {}
    ledger.add_serving({})
    assert ledger.serving_gpu_seconds["decode"] == 50.0
