"""Shared sub-trees of cached objects: equal in every way to what they replace, one object
per distinct content, the input left alone, and a table that stays within its bounds."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrelay.vocabulary.interning import SharedTrees, intern_text

# Decoded JSON: what an informer's transform is given. JSON has no NaN and no infinity
# (msgspec would encode either as null, which is what makes equal contents one key).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type at every level (1, 1.0 and True are told apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=300)
@given(json_values, json_values)
def test_a_shared_value_is_the_value_and_equal_ones_are_one_object(a: Any, b: Any) -> None:
    trees = SharedTrees()
    before_a, before_b = copy.deepcopy(a), copy.deepcopy(b)
    shared_a = trees.share(a)
    shared_b = trees.share(b)
    assert same(shared_a, a) and same(shared_b, b)
    assert same(a, before_a) and same(b, before_b)  # the input is left alone
    # Byte for byte: key order kept.
    assert msgspec.json.encode(shared_a) == msgspec.json.encode(a)
    if isinstance(a, dict | list) and same(a, b):
        assert shared_a is shared_b
    again = trees.share(copy.deepcopy(a))
    assert again is shared_a if isinstance(a, dict | list) else same(again, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"n": 1}, {"n": 1.0}),
        ({"n": 1}, {"n": True}),
        ([0], [False]),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # equal, but not byte for byte
        ({}, []),
        ({"x": None}, {}),
    ],
)
def test_values_that_differ_in_type_or_order_are_not_merged(a: Any, b: Any) -> None:
    trees = SharedTrees()
    shared_a, shared_b = trees.share(a), trees.share(b)
    assert shared_a is not shared_b
    assert same(shared_a, a) and same(shared_b, b)


def test_sub_trees_are_shared_between_objects_that_differ_elsewhere() -> None:
    trees = SharedTrees()
    template = {"spec": {"containers": [{"name": "main", "image": "trainer"}]}}
    one = trees.share_object(
        {"metadata": {"name": "a", "uid": "1"}, "spec": copy.deepcopy(template)}
    )
    two = trees.share_object(
        {"metadata": {"name": "b", "uid": "2"}, "spec": copy.deepcopy(template)}
    )
    assert one["spec"] is two["spec"]
    assert one["metadata"] == {"name": "a", "uid": "1"}
    assert two["metadata"] == {"name": "b", "uid": "2"}
    assert one["metadata"] is not two["metadata"]


def test_an_objects_own_fields_take_no_table_entry() -> None:
    trees = SharedTrees()
    obj = {
        "metadata": {"name": "a", "uid": "u-1", "resourceVersion": "9", "labels": {"app": "x"}},
        "spec": {"n": 1},
    }
    shared = trees.share_object(obj)
    assert shared == obj
    # The labels and the spec, not the metadata itself nor the object.
    assert len(trees) == 2


def test_the_table_stays_within_its_entries_and_bytes() -> None:
    trees = SharedTrees(entries=10, budget=10_000)
    for index in range(100):
        value = {"index": index, "padding": ["x" * 50]}
        assert trees.share(value) == value
        assert len(trees) <= 10
        assert trees.tabled_bytes <= 10_000
    small = SharedTrees(entries=1_000, budget=500)
    for index in range(100):
        small.share({"big": "y" * 100 + str(index)})
        assert small.tabled_bytes <= 500
    # Forgotten values are shared again afresh, still equal.
    assert trees.share({"index": 0, "padding": ["x" * 50]}) == {"index": 0, "padding": ["x" * 50]}


def test_the_most_recently_used_are_kept() -> None:
    trees = SharedTrees(entries=3)
    hot = trees.share({"hot": True})
    for index in range(10):
        trees.share({"cold": index})
        assert trees.share({"hot": True}) is hot


def test_short_strings_are_interned_long_ones_left() -> None:
    short = "".join(["team-", "a"])
    assert intern_text(short) is intern_text("team-a")
    long = "x" * 500
    assert intern_text(long) is long
    trees = SharedTrees()
    assert trees.share("".join(["ab", "c"])) is intern_text("abc")


@dataclass(frozen=True, slots=True)
class _Read:
    groups: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class _OtherRead:
    groups: tuple[str, ...]
    count: int


def test_encoded_values_are_shared_by_content_and_type() -> None:
    trees = SharedTrees()
    first = trees.share_encoded(_Read(("a", "b"), 2))
    assert trees.share_encoded(_Read(("a", "b"), 2)) is first
    other = trees.share_encoded(_OtherRead(("a", "b"), 2))
    assert type(other) is _OtherRead  # same encoding, another type: not merged
    assert trees.share_encoded(_Read(("a",), 2)) == _Read(("a",), 2)
    assert trees.share_encoded({"cpu": 1}) is trees.share_encoded({"cpu": 1})
    unencodable = object()
    assert trees.share_encoded(unencodable) is unencodable


def test_a_large_sub_tree_and_a_status_that_says_something_are_kept_as_decoded() -> None:
    trees = SharedTrees()
    bulk = {"env": [{"name": "BULK", "value": "x" * 70_000}]}
    assert trees.share(bulk) is bulk
    assert len(trees) == 0
    status = {"active": 1}
    obj = {"metadata": {"name": "a"}, "spec": {"n": 1}, "status": status}
    shared = trees.share_object(obj)
    assert shared["status"] is status
    empty = trees.share_object({"metadata": {"name": "b"}, "status": {}})
    assert (
        empty["status"] is trees.share_object({"metadata": {"name": "c"}, "status": {}})["status"]
    )
