"""The engine's input checks: one function per kind of input, tested here at each boundary."""

from __future__ import annotations

import math
import re

import pytest

from mfumon.mfu._checks import check_at_least, check_num_gpus


@pytest.mark.parametrize("value", [0.0, 0, 0.5, 1e300])
def test_at_least_accepts_the_minimum_and_above(value: float) -> None:
    check_at_least("tokens_per_second", value, 0.0)


@pytest.mark.parametrize(
    ("value", "shown"), [(-1e-9, "-1e-09"), (math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (True, "True")]
)
def test_at_least_refuses_below_non_finite_and_bool(value: float, shown: str) -> None:
    message = f"tokens_per_second must be a finite number >= 0, got {shown}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_at_least("tokens_per_second", value, 0.0)


def test_strictly_refuses_the_minimum_itself() -> None:
    with pytest.raises(ValueError, match=r"^peak_flops_per_gpu must be a finite number > 0, got 0\.0$"):
        check_at_least("peak_flops_per_gpu", 0.0, 0.0, strictly=True)
    check_at_least("peak_flops_per_gpu", 1e-300, 0.0, strictly=True)


def test_the_minimum_is_shown_as_given() -> None:
    with pytest.raises(ValueError, match=r"^x must be a finite number >= 2\.5, got 2$"):
        check_at_least("x", 2, 2.5)


@pytest.mark.parametrize("num_gpus", [1, 8, 4096])
def test_num_gpus_accepts_positive_ints(num_gpus: int) -> None:
    check_num_gpus(num_gpus)


@pytest.mark.parametrize(("num_gpus", "shown"), [(0, "0"), (-1, "-1"), (True, "True"), (1.0, "1.0"), (2.5, "2.5")])
def test_num_gpus_refuses_zero_negatives_bools_and_floats(num_gpus: int, shown: str) -> None:
    with pytest.raises(ValueError, match=f"^num_gpus must be an integer >= 1, got {re.escape(shown)}$"):
        check_num_gpus(num_gpus)
