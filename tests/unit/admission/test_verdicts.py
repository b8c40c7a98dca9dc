"""A reconcile's verdict from the last admission plan: refused, admitted, waiting (with its
position), not judged yet, or over its namespace's quota beside those being placed."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.admission.support import queue, queues
from tests.unit.admission.test_planner import candidate, key, view

from jobrelay.admission.fair_order import QUEUE_QUOTA_EXCEEDED
from jobrelay.admission.namespace_quota import NAMESPACE_QUOTA_EXCEEDED, read_hard
from jobrelay.admission.planner import AdmissionPlan, plan
from jobrelay.admission.queue_choice import (
    QUEUE_NOT_ALLOWED,
    QUEUE_NOT_FOUND,
    QueueChoice,
    Queued,
    QueueNotAllowed,
    QueueNotFound,
    Unqueued,
)
from jobrelay.admission.queue_model import Entry, QueueHold
from jobrelay.admission.verdicts import UNJUDGED, bound, queue_verdict
from jobrelay.admission.workload_reads import WorkloadRead
from jobrelay.kinds.base import WorkloadKey

ONE_CPU = read_hard({"requests.cpu": "1"})


def read(name: str, cpu: int = 1) -> WorkloadRead:
    return candidate(name, cpu=cpu).read


def entry(name: str, cpu: int = 1) -> Entry:
    found = read(name, cpu).entry
    assert found is not None
    return found


def judged(*names: str) -> AdmissionPlan:
    """A plan of queue q (2 CPUs, no borrowing) over ``names`` in order."""
    specs = queues(queue("q", nominal={"cpu": "2"}, borrowing={"cpu": "0"}))
    return plan(view(*(candidate(n, "q", created=i) for i, n in enumerate(names)), specs=specs))


@pytest.mark.parametrize(
    ("choice", "reason"),
    [(QueueNotFound("x"), QUEUE_NOT_FOUND), (QueueNotAllowed("x", "ns"), QUEUE_NOT_ALLOWED)],
)
def test_a_queue_that_cannot_take_it_refuses_it(choice: QueueChoice, reason: str) -> None:
    hold = queue_verdict(key("a"), read("a"), choice, last=None, limits=None, admitting={})
    assert hold is not None and hold.reason == reason and hold.settled


@pytest.mark.parametrize(
    ("choice", "limits", "expected"),
    [
        (Unqueued(), None, None),  # no bounds: placed as it comes, no pass needed
        (Unqueued(), ONE_CPU, UNJUDGED),  # a quota: the first pass says
        (Queued("q"), None, UNJUDGED),
    ],
)
def test_before_any_plan(choice: QueueChoice, limits: object, expected: QueueHold | None) -> None:
    got = queue_verdict(key("a"), read("a"), choice, last=None, limits=limits,  # type: ignore[arg-type]
                        admitting={})  # fmt: skip
    assert got == expected
    assert bound(choice, limits) == (expected is not None)  # type: ignore[arg-type]


def test_a_workload_placement_cannot_read_is_no_business_of_admission() -> None:
    unreadable = candidate("a", readable=False).read
    assert queue_verdict(key("a"), unreadable, Queued("q"), last=None, limits=None,
                         admitting={}) is None  # fmt: skip


def test_the_last_plan_says_who_may_go_and_where_the_others_wait() -> None:
    last = judged("a", "b", "c", "d")
    go = queue_verdict(key("a"), read("a"), Queued("q"), last=last, limits=None, admitting={})
    assert go is None
    waits = queue_verdict(key("d"), read("d"), Queued("q"), last=last, limits=None, admitting={})
    assert waits is not None and waits.reason == QUEUE_QUOTA_EXCEEDED
    assert waits.message.endswith("(position 2 in queue q)")
    # One the last plan has not seen (submitted since): the next pass says.
    new = queue_verdict(key("e"), read("e"), Queued("q"), last=last, limits=None, admitting={})
    assert new is UNJUDGED


def test_one_being_placed_goes_on() -> None:
    being_placed = {key("a"): entry("a")}
    assert queue_verdict(key("a"), read("a"), Queued("q"), last=None, limits=ONE_CPU,
                         admitting=being_placed) is None  # fmt: skip


def test_the_namespace_quota_counts_the_admitted_and_those_being_placed() -> None:
    last = plan(view(candidate("run", placed="w1")))  # "run" takes 1 CPU of ns
    hold = queue_verdict(key("a"), read("a"), Unqueued(), last=last, limits=ONE_CPU, admitting={})
    assert hold is not None and hold.reason == NAMESPACE_QUOTA_EXCEEDED
    empty = plan(view())
    alone = queue_verdict(key("a"), read("a"), Unqueued(), last=empty, limits=ONE_CPU, admitting={})
    assert alone is None
    # Another being placed takes the last of it: two reconciles never both take it.
    taken = {key("b"): entry("b")}
    hold = queue_verdict(key("a"), read("a"), Unqueued(), last=empty, limits=ONE_CPU,
                         admitting=taken)  # fmt: skip
    assert hold is not None and hold.reason == NAMESPACE_QUOTA_EXCEEDED
    # ... but one in another namespace does not.
    elsewhere = {WorkloadKey(key("b").kind, "other/b"): entry("b")}
    assert queue_verdict(key("a"), read("a"), Unqueued(), last=empty, limits=ONE_CPU,
                         admitting=elsewhere) is None  # fmt: skip


def test_a_queued_one_admitted_still_answers_to_its_namespace_quota() -> None:
    last = judged("a")
    hold = queue_verdict(key("a"), read("a"), Queued("q"), last=last, limits=ONE_CPU,
                         admitting={key("b"): entry("b")})  # fmt: skip
    assert hold is not None and hold.reason == NAMESPACE_QUOTA_EXCEEDED


@given(st.lists(st.integers(0, 3), max_size=6), st.integers(0, 3), st.integers(0, 4))
def test_under_a_quota_it_may_go_exactly_when_all_counted_stay_within(
    others: list[int], asked: int, hard: int
) -> None:
    being_placed: Mapping[WorkloadKey, Entry] = {
        key(f"o{i}"): entry(f"o{i}", cpu) for i, cpu in enumerate(others)
    }
    limits = read_hard({"requests.cpu": str(hard)})
    empty = plan(view())
    hold = queue_verdict(key("a"), read("a", asked), Unqueued(), last=empty, limits=limits,
                         admitting=being_placed)  # fmt: skip
    fits = asked == 0 or sum(others) + asked <= hard
    assert (hold is None) == fits
