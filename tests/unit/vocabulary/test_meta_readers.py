"""The written-out metadata readers read exactly what Meta reads, whatever the object holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.vocabulary.meta import (
    Meta,
    annotation_of,
    annotations_of,
    labels_of,
    metadata_of,
    uid_of,
)

_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
_MAPS = st.dictionaries(st.sampled_from(["a", "b", "uid"]), _SCALARS, max_size=3)
_ANYTHING = _SCALARS | _MAPS | st.lists(_SCALARS, max_size=2)
_METADATA = st.fixed_dictionaries(
    {},
    optional={"labels": _ANYTHING, "annotations": _ANYTHING, "uid": _ANYTHING},
)
_OBJECTS = st.none() | st.just({}) | st.fixed_dictionaries({"metadata": _METADATA | _ANYTHING})


@given(_OBJECTS)
def test_each_reader_reads_as_meta(obj: dict[str, Any] | None) -> None:
    meta = Meta(obj)
    assert metadata_of(obj) == meta.raw
    assert labels_of(obj) == meta.labels
    assert annotations_of(obj) == meta.annotations
    assert uid_of(obj) == meta.uid
    for key in ("a", "b"):
        assert annotation_of(obj, key) == meta.annotation(key)


def test_the_common_case() -> None:
    obj = {"metadata": {"uid": "u-1", "labels": {"l": "x"}, "annotations": {"a": 1}}}
    assert (uid_of(obj), labels_of(obj), annotation_of(obj, "a")) == ("u-1", {"l": "x"}, "1")
    assert annotation_of(obj, "missing") is None
    assert uid_of({"metadata": None}) == "" and labels_of({"metadata": []}) == {}
