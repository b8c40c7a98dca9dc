"""Queue figures: usage, demand, dominant share, water-filled fair share, fairness error."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import entry, fleet, queue, queues

from jobrelay.admission.shares import (
    QueueFigures,
    dominant_share,
    fair_shares,
    fairness_error,
    queue_figures,
)
from jobrelay.placement.units import resources_of


def test_dominant_share_is_the_resource_used_most() -> None:
    usage = resources_of({"cpu": "8", "memory": "64Gi"})
    assert dominant_share(usage, fleet("32", "128Gi")) == 0.5
    # A resource the fleet has none of cannot be shared: left out.
    assert dominant_share(resources_of({"cpu": "8", "nvidia.com/gpu": "1"}), fleet()) == 0.25


FAIR_CASES = [
    ("weights 1:1:2, all want everything", {"a": 1, "b": 1, "c": 2},
     {"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 0.25, "b": 0.25, "c": 0.5}),
    ("a small demand leaves the rest to the others", {"a": 1, "b": 1, "c": 1},
     {"a": 0.1, "b": 1.0, "c": 1.0}, {"a": 0.1, "b": 0.45, "c": 0.45}),
    ("everyone capped: the fleet is not all shared", {"a": 1, "b": 3},
     {"a": 0.2, "b": 0.3}, {"a": 0.2, "b": 0.3}),
    ("no demand, no share", {"a": 1, "b": 1}, {"a": 0.0, "b": 1.0}, {"a": 0.0, "b": 1.0}),
    ("cascading caps", {"a": 1, "b": 1, "c": 1, "d": 1},
     {"a": 0.05, "b": 0.2, "c": 1.0, "d": 1.0}, {"a": 0.05, "b": 0.2, "c": 0.375, "d": 0.375}),
    ("weight 0 gets nothing", {"a": 0, "b": 1}, {"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 1.0}),
]  # fmt: skip


@pytest.mark.parametrize(("weights", "caps", "expected"), [c[1:] for c in FAIR_CASES],
                         ids=[c[0] for c in FAIR_CASES])  # fmt: skip
def test_fair_shares_water_fill(weights: dict, caps: dict, expected: dict) -> None:
    shares = fair_shares(weights, caps)
    assert shares == pytest.approx(expected)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abx"), st.integers(0, 3), st.booleans()), max_size=40))
def test_queue_figures_sum_shared_requests_as_each_entry_on_its_own(raw: list) -> None:
    # Entries of one template share one requests object; others ask the same anew.
    shared = {cpu: entry("t", "a", cpu=str(cpu), memory="1Gi").requests for cpu in range(4)}
    entries = [
        dataclasses.replace(entry(f"e{n}", name, cpu=str(cpu), memory="1Gi", admitted=admitted),
                            **({"requests": shared[cpu]} if n % 2 else {}))
        for n, (name, cpu, admitted) in enumerate(raw)
    ]  # fmt: skip
    known = queues(queue("a"), queue("b", weight=2))
    figures = queue_figures(known, entries, fleet("32", "128Gi"))
    for name in known:
        mine = [e for e in entries if e.queue == name]
        demand: dict[str, int] = {}
        usage: dict[str, int] = {}
        for each in mine:
            for resource, value in each.requests.items():
                demand[resource] = demand.get(resource, 0) + value
                if each.admitted:
                    usage[resource] = usage.get(resource, 0) + value
        assert figures[name].demand == demand and figures[name].usage == usage
        assert figures[name].admitted == sum(e.admitted for e in mine)
        assert figures[name].pending == sum(not e.admitted for e in mine)


def test_queue_figures_count_usage_demand_and_shares() -> None:
    known = queues(queue("a"), queue("b", weight=3), queue("c", nominal={"cpu": "4"},
                                                                  borrowing={"cpu": "0"}))  # fmt: skip
    entries = [
        entry("a1", "a", cpu="8", admitted=True),
        entry("a2", "a", cpu="8"),
        entry("b1", "b", cpu="4", memory="64Gi", admitted=True),
        entry("b2", "b", cpu="40"),
        entry("c1", "c", cpu="2", admitted=True),
        entry("c2", "c", cpu="30"),
        entry("x1", "unknown", cpu="30", admitted=True),  # not a queue: left out
    ]
    figures = queue_figures(known, entries, fleet("32", "128Gi"))
    a, b, c = figures["a"], figures["b"], figures["c"]
    assert a.usage == {"cpu": 8000} and a.demand == {"cpu": 16000}
    assert (a.pending, a.admitted) == (1, 1)
    assert a.dominant_share == a.actual_share == 0.25
    assert b.dominant_share == 0.5 and b.weighted_share == pytest.approx(0.5 / 3)
    # c may never use more than 4 of 32 CPUs: its fair share is capped at 1/8; a wants
    # half the fleet, b (weight 3) the rest.
    assert c.fair_share == pytest.approx(0.125)
    assert a.fair_share + b.fair_share == pytest.approx(0.875)
    assert b.fair_share == pytest.approx(0.875 * 3 / 4)
    assert fairness_error(figures) == pytest.approx(
        max(0, a.fair_share - 0.25) + max(0, b.fair_share - 0.5) + max(0, 0.125 - 2 / 32)
    )


def test_fairness_error_sums_the_shortfalls_only() -> None:
    figures = [
        QueueFigures("a", 1, fair_share=0.5, actual_share=0.2),
        QueueFigures("b", 1, fair_share=0.5, actual_share=0.8),
    ]
    assert fairness_error(figures) == pytest.approx(0.3)
    assert fairness_error({f.name: f for f in figures}) == pytest.approx(0.3)
    assert fairness_error([]) == 0


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"),
                       st.tuples(st.floats(0.1, 10), st.floats(0, 1.5)), min_size=1))  # fmt: skip
def test_fair_shares_are_a_weighted_max_min_division(queues_: dict) -> None:
    weights = {name: w for name, (w, _) in queues_.items()}
    caps = {name: c for name, (_, c) in queues_.items()}
    shares = fair_shares(weights, caps)
    assert sum(shares.values()) <= 1 + 1e-9
    uncapped = [n for n in shares if shares[n] < caps[n] - 1e-9]
    for name in shares:
        assert -1e-12 <= shares[name] <= caps[name] + 1e-9
    if uncapped:  # the fleet is all given out, evenly per weight among the uncapped
        assert math.isclose(sum(shares.values()), 1, abs_tol=1e-9)
        per_weight = {shares[n] / weights[n] for n in uncapped}
        assert max(per_weight) - min(per_weight) <= 1e-9
        # and no capped queue got more per weight than an uncapped one
        for name in shares:
            assert shares[name] / weights[name] <= max(per_weight) + 1e-9
