"""The one rule for a cost nobody priced: None, never 0 (``mfumon.api.pricing.known_cost``), which the chargeback's
rows, its jobs and the job JSON all read."""

from __future__ import annotations

import pytest

from mfumon.api.pricing import known_cost


@pytest.mark.parametrize(
    ("cost", "gpu_seconds", "unpriced", "expected"),
    [
        (0.0, 3600.0, 3600.0, None),  # every GPU-second unpriced: unknown, not free
        (0.0, 3600.0, 1800.0, 0.0),  # half covered by a price of 0 (a free pool): known, 0
        (2.5, 3600.0, 3600.0, 2.5),  # energy priced though no GPU-hour price applies
        (7.2, 7200.0, 3600.0, 7.2),
        (0.0, 0.0, 0.0, 0.0),  # nothing billed: nothing to price
        (0.0, 3600.0, 3600.0 * (1 - 1e-15), None),  # float noise in the sums is not a priced share
    ],
)
def test_a_cost_is_none_only_when_nothing_of_it_was_priced(
    cost: float, gpu_seconds: float, unpriced: float, expected: float | None
) -> None:
    assert known_cost(cost, gpu_seconds, unpriced) == expected
