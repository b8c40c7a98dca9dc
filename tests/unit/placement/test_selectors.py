from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.placement.selectors import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    parse_selector,
)

R = Requirement
IN, NOT_IN = Operator.IN, Operator.NOT_IN


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        ("", ()),
        ("a=b", (R("a", IN, frozenset({"b"})),)),
        ("a==b", (R("a", IN, frozenset({"b"})),)),
        ("a!=b", (R("a", NOT_IN, frozenset({"b"})),)),
        ("a=", (R("a", IN, frozenset({""})),)),
        (" region in (west, east) ", (R("region", IN, frozenset({"west", "east"})),)),
        ("tier notin (gold)", (R("tier", NOT_IN, frozenset({"gold"})),)),
        ("gpu", (R("gpu", Operator.EXISTS),)),
        ("!spot", (R("spot", Operator.DOES_NOT_EXIST),)),
        (
            "example.com/zone=a,!spot,gpu",
            (
                R("example.com/zone", IN, frozenset({"a"})),
                R("spot", Operator.DOES_NOT_EXIST),
                R("gpu", Operator.EXISTS),
            ),
        ),
    ],
)
def test_parses_kubectl_syntax(text: str, requirements: tuple[Requirement, ...]) -> None:
    assert parse_selector(text).requirements == requirements


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("=b", "'=' is not a valid label key"),
        ("a b", "unexpected 'b' after key 'a'"),
        ("a,", "cannot end with ','"),
        ("a in ()", "empty value set"),
        ("a in (x", "unexpected end of selector"),
        ("a in x", "expected '(' after 'in'"),
        ("a in (x y)", "expected ',' or ')'"),
        ("a=b c=d", "expected ',' between requirements"),
        ("-a=b", "not a valid label key"),
        ("a=b/c", "not a valid label value"),
        ("!", "unexpected end of selector"),
    ],
)
def test_malformed_selectors_say_why(text: str, error: str) -> None:
    with pytest.raises(SelectorError, match=None) as raised:
        parse_selector(text)
    assert error in str(raised.value)


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("", {}, True),
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a!=b", {}, True),  # NotIn holds where the label is absent
        ("a!=b", {"a": "b"}, False),
        ("a in (x,y)", {"a": "y"}, True),
        ("a notin (x,y)", {"a": "z"}, True),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a,b=c", {"a": "1", "b": "c"}, True),
        ("a,b=c", {"b": "c"}, False),
    ],
)
def test_matches_as_kubernetes_does(text: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(text).matches(labels) is matches


@pytest.mark.parametrize(
    ("operator", "value", "label", "matches"),
    [
        (Operator.GT, "3", "4", True),
        (Operator.GT, "3", "3", False),
        (Operator.LT, "3", "2", True),
        (Operator.LT, "3", None, False),
        (Operator.GT, "3", "many", False),
    ],
)
def test_gt_and_lt_need_integer_labels(
    operator: Operator, value: str, label: str | None, matches: bool
) -> None:
    labels = {} if label is None else {"k": label}
    assert Requirement("k", operator, frozenset({value})).matches(labels) is matches


names = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
requirements = st.one_of(
    st.builds(R, names, st.just(IN), st.frozensets(names, min_size=1, max_size=3)),
    st.builds(R, names, st.just(NOT_IN), st.frozensets(names, min_size=1, max_size=3)),
    st.builds(R, names, st.sampled_from([Operator.EXISTS, Operator.DOES_NOT_EXIST])),
)


@given(st.lists(requirements, max_size=4))
def test_a_selector_reads_back_as_written(found: list[Requirement]) -> None:
    selector = Selector(tuple(found))
    assert parse_selector(str(selector)) == selector
