"""Where a hardware estimate came from (issue 53): one GPU's, from the exporter's flag; a job's, from its GPUs."""

from __future__ import annotations

import pytest

from mfumon.mfu import CYCLE_COUNTERS, MIXED, RATIO_CLOCK, estimate_source, job_estimate_source


def test_the_source_names_are_the_public_ones() -> None:
    assert (CYCLE_COUNTERS, RATIO_CLOCK, MIXED) == ("cycle_counters", "ratio_clock", "mixed")


@pytest.mark.parametrize(("flag", "source"), [(1, "cycle_counters"), (0, "ratio_clock"), (None, "ratio_clock")])
def test_a_gpu_estimate_is_exact_only_when_the_exporter_flags_it(flag: int | None, source: str) -> None:
    assert estimate_source(flag) == source


@pytest.mark.parametrize(
    ("estimated", "exact", "source"),
    [
        (0, 0, None),  # no estimate, no source
        (1, 1, "cycle_counters"),
        (3, 3, "cycle_counters"),
        (1, 0, "ratio_clock"),
        (3, 0, "ratio_clock"),
        (2, 1, "mixed"),
        (3, 2, "mixed"),
    ],
)
def test_a_job_estimate_has_one_source_only_when_all_its_gpus_share_it(
    estimated: int, exact: int, source: str | None
) -> None:
    assert job_estimate_source(estimated, exact) == source
