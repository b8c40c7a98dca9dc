"""Recorded scrapes as promtool input series (tests/promseries.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.promseries import input_series, samples_of, series_name, value_text

LEADER = """# HELP jobrelay_leader 1 while this replica holds the leader Lease.
# TYPE jobrelay_leader gauge
jobrelay_leader 1.0
# HELP jobrelay_apiserver_requests_total Requests.
# TYPE jobrelay_apiserver_requests_total counter
jobrelay_apiserver_requests_total{worker="",verb="patch",code="200"} 3.0
jobrelay_apiserver_requests_total{worker="w1",verb="create",code="201"} 2.0
"""
STANDBY = """# TYPE jobrelay_leader gauge
jobrelay_leader 0.0
"""


def test_a_scrape_is_labelled_as_prometheus_stores_it() -> None:
    found = samples_of(LEADER, instance="a:8080", job="jobrelay")
    target = (("instance", "a:8080"), ("job", "jobrelay"))
    assert found[("up", target)] == 1
    assert found[("jobrelay_leader", target)] == 1
    # worker="" is dropped, as Prometheus drops empty labels.
    manager = (("code", "200"), *target, ("verb", "patch"))
    assert found[("jobrelay_apiserver_requests_total", manager)] == 3


def test_rounds_become_series_held_at_their_last_value() -> None:
    rounds = [{"a": LEADER, "b": STANDBY}, {"a": LEADER.replace(" 3.0", " 5.0")}]
    series = {s["series"]: s["values"] for s in input_series(rounds, hold=10)}
    assert series['jobrelay_leader{instance="a",job="jobrelay"}'] == "1 1+0x10"
    # Gone from the last round: no sample there, and nothing held.
    assert series['jobrelay_leader{instance="b",job="jobrelay"}'] == "0 _"
    manager = (
        'jobrelay_apiserver_requests_total{code="200",instance="a",job="jobrelay",verb="patch"}'
    )
    assert series[manager] == "3 5+0x10"


def test_no_rounds_is_an_error() -> None:
    with pytest.raises(ValueError, match="no scrape"):
        input_series([], hold=1)


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0"), (1.0, "1"), (-2.5, "-2.5"), (1.79e9, "1790000000"), (1e-7, "0.0000001"),
     (math.inf, "Inf"), (-math.inf, "-Inf"), (math.nan, "NaN")],
)  # fmt: skip
def test_values_are_positional(value: float, text: str) -> None:
    assert value_text(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_value_reads_back_exactly(value: float) -> None:
    text = value_text(value)
    assert "e" not in text.lower() and float(text) == value


def test_label_values_are_escaped() -> None:
    assert series_name("m", (("a", 'x"y\\z'),)) == 'm{a="x\\"y\\\\z"}'
