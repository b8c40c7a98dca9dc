"""The charts' data files as the CLI fills them in: placeholders replaced verbatim in one
pass (as the charts' fill helpers do for the values they pass), and the files name what the
controller uses (the origin label)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrelay.manifests import chart_sources
from jobrelay.manifests.chart_sources import fill
from jobrelay.vocabulary.names import ORIGIN_LABEL


@pytest.mark.parametrize(
    ("data", "values", "filled"),
    [
        ("$(a)", {"a": "x"}, "x"),
        ("$(a)-$(a) $(b)", {"a": "x", "b": "y"}, "x-x y"),
        ("no placeholder: $a, (a), $((a)", {}, "no placeholder: $a, (a), $((a)"),
        ("$(a)", {"a": "$(b)", "b": "never"}, "$(b)"),  # one pass: a value is not read
        ({"$(a)": ["$(a)", 1, None, True]}, {"a": "k"}, {"k": ["k", 1, None, True]}),
        ([{"n": "$(a)/status"}], {"a": "jobs"}, [{"n": "jobs/status"}]),
    ],
)  # fmt: skip
def test_fill(data: Any, values: dict[str, str], filled: Any) -> None:
    assert fill(data, values) == filled


def test_an_unknown_placeholder_is_an_error() -> None:
    with pytest.raises(KeyError):
        fill({"x": "$(missing)"}, {})


@given(st.text())
def test_any_text_goes_in_verbatim(value: str) -> None:
    assert fill(["<$(v)>", {"$(v)": "$(v)$(v)"}], {"v": value}) == [
        f"<{value}>",
        {value: value + value},
    ]


def test_every_placeholder_of_the_data_files_is_one_the_cli_fills_in() -> None:
    placeholders = {
        chart_sources.ADMISSION_POLICIES: {
            "group", "plural", "controller", "delegated", "controllerNameLiteral",
            "groupLiteral", "pluralLiteral", "field", "valueLiteral",
        },
        chart_sources.WORKER_ACCESS: {
            "group", "plural", "name", "namespace", "origin", "originLiteral",
            "namespaceLiteral", "usernameLiteral", "nameLiteral", "namespaceRoleLiteral", "opened",
        },
    }  # fmt: skip
    for name, known in placeholders.items():
        document = chart_sources.chart_document(name)
        fill(document, dict.fromkeys(known, ""))  # a KeyError names one it does not know


def test_the_worker_policy_checks_the_label_the_controller_writes() -> None:
    policy = chart_sources.chart_document(chart_sources.WORKER_ACCESS)["admissionPolicy"]
    origin_checks = [
        v for v in policy["spec"]["validations"] if "$(originLiteral)" in v["expression"]
    ]
    assert len(origin_checks) == 3
    for validation in origin_checks:
        assert f'labels["{ORIGIN_LABEL}"] == $(originLiteral)' in validation["expression"]
        assert f"{ORIGIN_LABEL}=$(origin)" in validation["message"]
