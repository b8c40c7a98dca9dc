"""Index interval strings as a worker or a user may write them: a ValueError or intervals,
never a set of a billion integers."""

from __future__ import annotations

from hypothesis import given
from tests.unit.fuzz.hostile import counted, fuzz, index_text

from jobrelay.kinds.job import indexes


@fuzz(600)
@given(index_text, index_text)
@counted
def test_index_strings_parse_or_raise_value_error_fast(first: str, second: str) -> None:
    try:
        a, b = indexes.parse_indexes(first), indexes.parse_indexes(second)
    except ValueError:
        return
    merged = indexes.union(a, b)
    assert indexes.count(merged) <= indexes.count(a) + indexes.count(b)
    assert indexes.count(indexes.difference(merged, b)) <= indexes.count(merged)
    assert indexes.below(merged, 10) == indexes.below(merged, 10)
    assert indexes.parse_indexes(indexes.format_indexes(merged)) == merged
    indexes.overlaps(merged, b)
