"""The t distribution and Welch's test against published values (NIST/SEMATECH e-Handbook, table 1.3.6.7.2)."""

from __future__ import annotations

import pytest

from mfumon.api.regressions.stats import estimate, incomplete_beta, t_quantile, t_two_sided_p, welch


@pytest.mark.parametrize(
    ("df", "upper_975"),
    [(1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042), (100, 1.984)],
)
def test_t_quantiles_match_the_table(df: int, upper_975: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(upper_975, abs=1e-3)
    assert t_two_sided_p(upper_975, df) == pytest.approx(0.05, abs=1e-4)


def test_incomplete_beta_edges_and_symmetry() -> None:
    assert incomplete_beta(2.0, 3.0, 0.0) == 0.0 and incomplete_beta(2.0, 3.0, 1.0) == 1.0
    assert incomplete_beta(2.0, 3.0, 0.4) == pytest.approx(1.0 - incomplete_beta(3.0, 2.0, 0.6))
    assert incomplete_beta(1.0, 1.0, 0.3) == pytest.approx(0.3)  # the uniform distribution


def test_welch_on_a_textbook_pair() -> None:
    # two groups whose Welch t and df are computed by hand: means 20 and 22, variances 4 and 1, n 5 and 5
    before = [18.0, 19.0, 20.0, 21.0, 22.0]  # variance 2.5
    after = [21.0, 21.5, 22.0, 22.5, 23.0]  # variance 0.625
    test = welch(before, after)
    assert test.t == pytest.approx(2.0 / ((2.5 / 5 + 0.625 / 5) ** 0.5))
    assert test.df == pytest.approx((0.5 + 0.125) ** 2 / (0.5**2 / 4 + 0.125**2 / 4))
    assert 0.0 < test.p_value < 0.05


def test_an_estimate_has_its_t_interval() -> None:
    found = estimate([1.0, 2.0, 3.0])
    assert found.mean == 2.0 and found.spread == 1.0 and found.n == 3
    assert found.high - found.mean == pytest.approx(4.303 / 3**0.5, abs=1e-3)
