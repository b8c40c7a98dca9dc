from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jobrelay.vocabulary.merge_patch import apply_merge_patch, merge_patch

# JSON documents without nulls (a merge patch cannot set a value to null).
scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=3))
documents = st.recursive(
    st.dictionaries(st.sampled_from("abcd"), scalars, max_size=4),
    lambda inner: st.dictionaries(
        st.sampled_from("abcd"),
        st.one_of(scalars, inner, st.lists(scalars, max_size=3)),
        max_size=4,
    ),
    max_leaves=12,
)


@given(documents, documents)
def test_applying_the_patch_gives_the_new_document(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert apply_merge_patch(old, merge_patch(old, new)) == new


@given(documents)
def test_equal_documents_need_no_patch(doc: dict[str, Any]) -> None:
    assert merge_patch(doc, doc) == {}


def test_removed_fields_become_null_and_lists_are_replaced() -> None:
    old = {"ready": 1, "conditions": [{"type": "A"}], "uncounted": {"failed": ["x"]}}
    new = {"conditions": [{"type": "A"}, {"type": "B"}], "uncounted": {}}
    assert merge_patch(old, new) == {
        "ready": None,
        "conditions": [{"type": "A"}, {"type": "B"}],
        "uncounted": {"failed": None},
    }
