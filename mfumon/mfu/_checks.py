"""The input checks of the MFU engine, one function per kind of input, so each rule has one copy to test.

`evaluate` checks every input of a report once, before any arithmetic; the public building blocks
(`compute_mfu`, `compute_mbu`, `ServingWindow`) check their own arguments with the same functions.
"""

from __future__ import annotations

import math


def check_at_least(name: str, value: float, minimum: float, *, strictly: bool = False) -> None:
    """Raise ValueError unless `value` is a finite number (not a bool) >= `minimum` (> with `strictly`)."""
    below = value <= minimum if strictly else value < minimum
    if isinstance(value, bool) or not math.isfinite(value) or below:
        bound = ">" if strictly else ">="
        raise ValueError(f"{name} must be a finite number {bound} {minimum:g}, got {value!r}")


def check_num_gpus(num_gpus: int) -> None:
    """Raise ValueError unless `num_gpus` is an int (not a bool) >= 1: a job runs on whole devices or MIG slices."""
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
        raise ValueError(f"num_gpus must be an integer >= 1, got {num_gpus!r}")
