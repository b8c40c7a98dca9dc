"""One admission pass: weighted DRF across queues, priority within, ceilings, FIFO kinds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.admission.support import entry, fleet, queue, queues

from jobrelay.admission.fair_order import (
    EXCEEDS_QUEUE_QUOTA,
    NOMINAL_QUOTA_EXCEEDED,
    QUEUE_QUOTA_EXCEEDED,
    QUEUED_BEHIND,
    WAITING_FOR_ROOM,
    admission_pass,
)
from jobrelay.admission.namespace_quota import (
    EXCEEDS_NAMESPACE_QUOTA,
    NAMESPACE_QUOTA_EXCEEDED,
    read_hard,
)
from jobrelay.admission.queue_model import Entry


def room(cpu: int) -> Callable[[Entry], bool]:
    """A fits check over one pool of ``cpu`` free CPUs, each admission taking its part."""
    free = [cpu * 1000]

    def fits(candidate: Entry) -> bool:
        asked = candidate.requests.get("cpu", 0)
        if asked > free[0]:
            return False
        free[0] -= asked
        return True

    return fits


def admitted_by_queue(keys: tuple[str, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in keys:
        space = key.split(" ")[1].split("/")[0]
        counts[space] = counts.get(space, 0) + 1
    return counts


def test_an_idle_fleet_is_divided_by_weight() -> None:
    known = queues(queue("a"), queue("b"), queue("c", weight=2))
    entries = [entry(f"{q}{i}", q, created=i) for q in "abc" for i in range(40)]
    result = admission_pass(known, entries, fleet("32"), fits=room(32))
    assert admitted_by_queue(result.admitted) == {"a": 8, "b": 8, "c": 16}
    # Every queue's oldest first, and the first three admissions go one to each queue.
    assert {k.split("/")[1] for k in result.admitted[:3]} >= {"a0", "b0"}
    assert result.holding["Job a/a8"].reason == WAITING_FOR_ROOM
    assert result.positions["Job a/a8"] == 1 and result.positions["Job a/a39"] == 32


def test_the_share_already_used_counts() -> None:
    known = queues(queue("a"), queue("b"))
    entries = [entry(f"run{i}", "a", admitted=True) for i in range(6)]
    entries += [entry(f"{q}{i}", q, created=i) for q in "ab" for i in range(10)]
    result = admission_pass(known, entries, fleet("16"), fits=room(10))
    assert admitted_by_queue(result.admitted) == {"a": 2, "b": 8}


def test_after_one_is_held_the_alike_ones_right_behind_it_are_held_unjudged() -> None:
    known = queues(queue("a"))
    # The room's fit reads only the CPU asked: that is their likeness.
    entries = [entry(f"big{i}", "a", cpu="4", created=i, likeness="4") for i in range(4)]
    entries += [entry("small", "a", created=5, likeness="1"),
                entry("big9", "a", cpu="4", created=9, likeness="4")]  # fmt: skip
    asked: list[str] = []
    fits = room(2)

    def counted(candidate: Entry) -> bool:
        asked.append(candidate.key.split("/")[1])
        return fits(candidate)

    result = admission_pass(known, entries, fleet("32"), fits=counted,
                            alike=lambda _held: True)  # fmt: skip
    assert asked == ["big0", "small", "big9"]  # big9 follows "small", not a held one
    assert result.admitted == ("Job a/small",)
    assert {result.holding[f"Job a/big{i}"].reason for i in (0, 1, 2, 3, 9)} == {WAITING_FOR_ROOM}
    assert [result.positions[f"Job a/big{i}"] for i in (0, 1, 2, 3, 9)] == [1, 2, 3, 4, 5]


def test_a_queue_within_its_nominal_goes_first() -> None:
    known = queues(queue("a", nominal={"cpu": "4"}), queue("b", weight=100))
    entries = [entry(f"{q}{i}", q, created=i) for q in "ab" for i in range(10)]
    result = admission_pass(known, entries, fleet("32"), fits=room(6))
    assert [k.split("/")[1] for k in result.admitted[:4]] == ["a0", "a1", "a2", "a3"]
    assert admitted_by_queue(result.admitted) == {"a": 4, "b": 2}


def test_within_a_queue_priority_then_age_then_key() -> None:
    known = queues(queue("a"))
    entries = [
        entry("old-low", "a", created=1),
        entry("new-high", "a", priority=100, created=9),
        entry("mid-b", "a", created=5),
        entry("mid-a", "a", created=5),
    ]
    result = admission_pass(known, entries, fleet("32"), fits=room(3))
    assert result.admitted == ("Job a/new-high", "Job a/old-low", "Job a/mid-a")
    assert result.positions == {"Job a/mid-b": 1}


def test_a_queue_never_goes_above_nominal_plus_borrowing() -> None:
    known = queues(queue("team-a", nominal={"cpu": "32"}, borrowing={"cpu": "0"}))
    entries = [entry("run", "team-a", cpu="30", admitted=True), entry("next", "team-a", cpu="10")]
    result = admission_pass(known, entries, fleet("64"), fits=room(64))
    assert result.admitted == ()
    held = result.holding["Job team-a/next"]
    assert held.reason == QUEUE_QUOTA_EXCEEDED
    assert held.message == "team-a: 40 of 32 cpu (nominal 32, borrowing limit 0)"


def test_borrowing_above_nominal_up_to_the_limit() -> None:
    known = queues(queue("a", nominal={"cpu": "4"}, borrowing={"cpu": "2"}))
    entries = [entry(f"a{i}", "a", created=i) for i in range(10)]
    result = admission_pass(known, entries, fleet("32"), fits=room(32))
    assert len(result.admitted) == 6
    assert result.holding["Job a/a6"].message == "a: 7 of 6 cpu (nominal 4, borrowing limit 2)"


def test_a_workload_larger_than_the_ceiling_is_told_it_never_fits() -> None:
    known = queues(queue("a", nominal={"memory": "1Gi"}, borrowing={"memory": "512Mi"}))
    entries = [entry("huge", "a", memory="2Gi")]
    held = admission_pass(known, entries, fleet(), fits=room(32)).holding["Job a/huge"]
    assert held.reason == EXCEEDS_QUEUE_QUOTA
    assert "asks 2Gi memory" in held.message and "1536Mi" in held.message


def test_best_effort_passes_over_a_head_that_does_not_fit() -> None:
    known = queues(queue("a"))
    entries = [entry("big", "a", cpu="8", created=0), entry("small", "a", cpu="2", created=1)]
    result = admission_pass(known, entries, fleet(), fits=room(4))
    assert result.admitted == ("Job a/small",)
    assert result.holding["Job a/big"].reason == WAITING_FOR_ROOM
    assert result.positions == {"Job a/big": 1}


def test_strict_fifo_stops_at_its_head() -> None:
    known = queues(queue("a", strict=True), queue("b"))
    entries = [
        entry("big", "a", cpu="8", created=0),
        entry("small", "a", cpu="2", created=1),
        entry("other", "b", cpu="2", created=2),
    ]
    result = admission_pass(known, entries, fleet(), fits=room(4))
    assert result.admitted == ("Job b/other",)
    assert result.holding["Job a/big"].reason == WAITING_FOR_ROOM
    behind = result.holding["Job a/small"]
    assert behind.reason == QUEUED_BEHIND and "behind Job a/big" in behind.message
    assert result.positions == {"Job a/big": 1, "Job a/small": 2}


def test_strict_fifo_stops_at_a_head_over_quota_too() -> None:
    known = queues(queue("a", strict=True, nominal={"cpu": "2"}, borrowing={"cpu": "0"}))
    entries = [entry("big", "a", cpu="4", created=0), entry("small", "a", cpu="1", created=1)]
    result = admission_pass(known, entries, fleet(), fits=room(32))
    assert result.admitted == ()
    assert result.holding["Job a/big"].reason == EXCEEDS_QUEUE_QUOTA
    assert result.holding["Job a/small"].reason == QUEUED_BEHIND


@pytest.mark.parametrize("weight", [0.0, -1.0])
def test_a_queue_of_no_weight_admits_nothing(weight: float) -> None:
    known = queues(queue("a", weight=weight))
    result = admission_pass(known, [entry("x", "a")], fleet(), fits=room(32))
    assert result.admitted == () and "Job a/x" in result.holding


def test_entries_of_unknown_queues_are_left_to_the_caller() -> None:
    result = admission_pass(queues(queue("a")), [entry("x", "gone")], fleet(), fits=room(32))
    assert result.admitted == () and result.holding == {} and result.positions == {}


def test_queues_are_ordered_by_the_share_they_would_have_with_their_next() -> None:
    # 1:1:3 of 32 CPUs is 6.4 / 6.4 / 19.2. At 6 / 7 / 18 the shares before are tied
    # (6/32 and 18/96): by the share after, c (19/96) goes before a (7/32), else c would
    # stay at 18 for good while a and b swap the spare CPU.
    known = queues(queue("a"), queue("b"), queue("c", weight=3))
    running = [entry(f"{q}{i}", q, admitted=True) for q, n in (("a", 6), ("b", 7), ("c", 18))
               for i in range(n)]  # fmt: skip
    pending = [entry("a-next", "a", created=1), entry("c-next", "c", created=2)]
    result = admission_pass(known, [*running, *pending], fleet("32"), fits=room(1))
    assert result.admitted == ("Job c/c-next",)


def test_a_namespace_quota_holds_across_one_pass() -> None:
    # Both fit the quota alone; admitted together they would take 3 of its 2 CPUs.
    known = queues(queue("a"), queue("b"))
    entries = [
        entry("running", "", cpu="500m", namespace="lab", admitted=True),  # unqueued
        entry("x", "a", cpu="1", namespace="lab", created=1),
        entry("y", "b", cpu="1", namespace="lab", created=2),
        entry("z", "b", cpu="1", namespace="other", created=3),
        entry("huge", "a", cpu="10", namespace="lab", created=4),
    ]
    limits = {"lab": read_hard({"requests.cpu": "2"})}
    result = admission_pass(known, entries, fleet(), fits=room(32), namespace_quotas=limits)
    assert result.admitted == ("Job lab/x", "Job other/z")
    waiting = result.holding["Job lab/y"]
    assert waiting.reason == NAMESPACE_QUOTA_EXCEEDED
    assert waiting.message.startswith("namespace lab: 2500m of 2 cpu requests")
    assert result.holding["Job lab/huge"].reason == EXCEEDS_NAMESPACE_QUOTA


def test_those_served_first_take_the_room_before_the_fair_order_within_their_quotas() -> None:
    # a (at its nominal 2) has an older Job back in its queue; b's winner made the room.
    known = queues(queue("a", nominal={"cpu": "2"}),
                   queue("b", nominal={"cpu": "2"}, borrowing={"cpu": "0"}))  # fmt: skip
    waiting = [entry("a0", "a", created=0), entry("b-big", "b", cpu="4", created=1),
               entry("b0", "b", created=2)]  # fmt: skip
    plain = admission_pass(known, waiting, fleet(), fits=room(1))
    assert plain.admitted == ("Job a/a0",)  # b's head asks past its ceiling: a goes first
    first = admission_pass(known, waiting, fleet(), fits=room(1), first={"Job b/b0"})
    assert first.admitted == ("Job b/b0",) and first.positions == {"Job a/a0": 1,
                                                                    "Job b/b-big": 1}  # fmt: skip
    # Never past its queue's ceiling, nor into room that is not there.
    over = admission_pass(known, waiting, fleet(), fits=room(8), first={"Job b/b-big"})
    assert "Job b/b-big" not in over.admitted
    none = admission_pass(known, waiting, fleet(), fits=room(0), first={"Job b/b0"})
    assert none.admitted == ()


@pytest.mark.parametrize(
    ("nominal", "borrowing", "used", "asked", "admitted", "words"),
    [
        ("4", None, 0, "2", True, ""),
        ("4", None, 2, "2", True, ""),  # exactly its nominal
        ("4", None, 3, "2", False, "q: it asks to run at most once"),  # would borrow
        ("4", "8", 3, "2", False, "5 of nominal 4 cpu"),  # may borrow, but not it
        ("4", None, 0, "6", False, "it asks 6 cpu, more than the nominal 4"),
        (None, None, 0, "1", False, "more than the nominal 0"),  # a queue guaranteeing nothing
    ],
)
def test_a_workload_that_may_not_be_preempted_never_borrows(
    nominal: str | None, borrowing: str | None, used: int, asked: str, admitted: bool, words: str
) -> None:
    known = queues(queue("q", nominal={"cpu": nominal} if nominal else None,
                         borrowing={"cpu": borrowing} if borrowing else None))  # fmt: skip
    running = [entry(f"r{i}", "q", admitted=True) for i in range(used)]
    once = dataclasses.replace(entry("once", "q", cpu=asked, created=9), preemptible=False)
    made = admission_pass(known, [*running, once], fleet(), fits=room(100))
    assert ("Job q/once" in made.admitted) == admitted
    if not admitted:
        held = made.holding["Job q/once"]
        assert held.reason == NOMINAL_QUOTA_EXCEEDED and words in held.message, held.message
    # A preemptible one of the same size borrows as its queue allows.
    free = dataclasses.replace(once, preemptible=True)
    again = admission_pass(known, [*running, free], fleet(), fits=room(100))
    if borrowing is None and nominal is not None:
        assert "Job q/once" in again.admitted


@given(st.integers(0, 8), st.integers(0, 8), st.lists(st.integers(1, 4), max_size=8))
def test_what_may_not_be_preempted_keeps_its_queue_within_nominal(
    nominal: int, used: int, asks: list[int]
) -> None:
    known = queues(queue("q", nominal={"cpu": str(nominal)}))
    running = [entry(f"r{i}", "q", admitted=True) for i in range(used)]
    waiting = [dataclasses.replace(entry(f"o{i}", "q", cpu=str(c), created=i), preemptible=False)
               for i, c in enumerate(asks)]  # fmt: skip
    made = admission_pass(known, [*running, *waiting], fleet(), fits=room(100))
    taken = sum(c for i, c in enumerate(asks) if f"Job q/o{i}" in made.admitted)
    assert not made.admitted or used + taken <= nominal
