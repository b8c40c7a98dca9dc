"""Index interval strings: parsing as strictly as the apiserver, and set operations on intervals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.kinds.job import indexes


def as_set(intervals: list[indexes.Interval]) -> set[int]:
    return {i for first, last in intervals for i in range(first, last + 1)}


def from_set(values: set[int]) -> list[indexes.Interval]:
    return indexes.union([(v, v) for v in values])


index_sets = st.sets(st.integers(0, 40), max_size=25)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("", []), ("0", [(0, 0)]), ("1,3-5,7", [(1, 1), (3, 5), (7, 7)]), ("1,2", [(1, 1), (2, 2)])],
)
def test_parse(text: str, parsed: list[indexes.Interval]) -> None:
    assert indexes.parse_indexes(text) == parsed


@pytest.mark.parametrize(
    "text", ["2,1", "1,1", "3-1", "2-2", "1-3,3", "a", "-1", "1-", "1-2-3", " 1", "+1", ","]
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        indexes.parse_indexes(text)


@given(index_sets)
def test_format_then_parse_round_trips(values: set[int]) -> None:
    text = indexes.format_indexes(from_set(values))
    assert as_set(indexes.parse_indexes(text)) == values
    assert indexes.parse_indexes(text) == from_set(values)


@given(index_sets, index_sets)
def test_set_operations_match_sets(a: set[int], b: set[int]) -> None:
    ia, ib = from_set(a), from_set(b)
    assert as_set(indexes.union(ia, ib)) == a | b
    assert as_set(indexes.difference(ia, ib)) == a - b
    assert indexes.overlaps(ia, ib) == bool(a & b)
    assert indexes.count(ia) == len(a)
    assert as_set(indexes.below(ia, 20)) == {v for v in a if v < 20}


def test_union_merges_adjacent_intervals_as_the_controller_prints_them() -> None:
    merged = indexes.union([(0, 1), (5, 5)], [(2, 3)])
    assert indexes.format_indexes(merged) == "0-3,5"
