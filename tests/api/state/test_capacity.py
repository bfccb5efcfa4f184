"""Placement arithmetic behind fragmentation: whole units on nodes, largest first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mfumon.api.state.capacity import placeable


def test_units_must_fit_whole() -> None:
    assert placeable(((4, 1),), [3, 3]) is False  # 6 free in total, no node with 4
    assert placeable(((4, 1),), [4, 0]) is True
    assert placeable(((2, 3),), [4, 2]) is True  # units may share a node
    assert placeable(((8, 2),), [8, 8, 7]) is True and placeable(((8, 2),), [8, 7, 7]) is False
    assert placeable(((3, 1), (1, 2)), [3, 1, 1]) is True
    assert placeable((), []) is True


@given(st.lists(st.integers(0, 8), max_size=12), st.lists(st.tuples(st.integers(1, 8), st.integers(1, 4)), max_size=4))
def test_a_placement_never_exceeds_what_is_free(free: list[int], units: list[tuple[int, int]]) -> None:
    need = sum(g * n for g, n in units)
    if placeable(tuple(units), free):
        assert need <= sum(free) and all(g <= max(free, default=0) for g, _ in units)
    if units and all(g == units[0][0] for g, _ in units):  # identical units: greedy is exact
        per_node = sum(f // units[0][0] for f in free)
        assert placeable(tuple(units), free) == (per_node >= sum(n for _, n in units))
