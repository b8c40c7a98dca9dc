"""A pass's sort kept for the next (admission/sorted_view.py): the plan made from the last
pass's sort, re-sorting only what changed, is the plan made from nothing, whatever
changed in between."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import queue, queues
from tests.unit.admission.test_fair_order import room
from tests.unit.admission.test_planner import Room, candidate, key

from jobrelay.admission.fair_order import admission_pass, queue_order
from jobrelay.admission.namespace_quota import read_hard
from jobrelay.admission.planner import AdmissionPlan, AdmissionView, Candidate, plan
from jobrelay.admission.queue_model import Entry, Fleet, Preempt, Reclaim
from jobrelay.admission.shares import queue_figures
from jobrelay.admission.sorted_view import sort_view

SPECS = queues(
    queue("q0", nominal={"cpu": "2"}, borrowing={"cpu": "2"}, labels={"team": "a"}),
    queue("q1", weight=2, reclaim=Reclaim.ANY, nominal={"cpu": "1"}, labels={"team": "a"}),
)


def _view(workloads: dict[str, Candidate], labels: dict[str, dict[str, str]],
          preempting: dict[str, str], free: int, hard: int | None,
          before: AdmissionPlan | None, *, resort: bool = False) -> AdmissionView:  # fmt: skip
    """The view of a pass after ``before``; ``resort``: one that sorts every workload
    afresh (nothing else differs)."""
    return AdmissionView(
        specs=SPECS,
        namespace_labels=labels,
        quotas={} if hard is None else {"ns0": read_hard({"requests.cpu": str(hard)})},
        fleet=Fleet({"cpu": 16_000}),
        workloads=list(workloads.values()),
        held=[c.key for c in workloads.values() if not c.admitted],
        fits=Room(free).fits,  # a fresh room for each plan: it is taken as it admits
        room=lambda: ({"w1": {"cpu": 0}}, lambda _key, _workload: ("w1",)),
        preempting={key(name, "ns0"): Preempt(by, "") for name, by in preempting.items()},
        built=before.entries if before is not None else {},
        nominated=before.nominated if before is not None else frozenset(),
        sorted_before=before.sorting if before is not None and not resort else None,
    )


def _said(made: AdmissionPlan) -> dict[str, Any]:
    """Everything a plan says; the namespaces' admitted entries in any order."""
    fields = {f.name: getattr(made, f.name) for f in dataclasses.fields(made)}
    del fields["sorting"]
    fields["by_namespace"] = {
        namespace: sorted(entries, key=lambda e: e.key)
        for namespace, entries in made.by_namespace.items()
    }
    return fields


_one = st.tuples(
    st.sampled_from([None, "q0", "q1", "nowhere"]),  # its label
    st.integers(0, 3),  # cpu
    st.integers(0, 1),  # namespace
    st.booleans(),  # admitted (placed)
    st.sampled_from(["", "", "Job ns0/w0", "Job ns0/w1"]),  # preempted by (its winner)
)
_change = st.one_of(
    st.tuples(st.just("new"), st.integers(0, 5), _one),  # a workload read anew, or added
    st.tuples(st.just("gone"), st.integers(0, 5)),
    st.tuples(st.just("admitted"), st.integers(0, 5)),  # the same read, admitted flipped
    st.tuples(st.just("labels"), st.booleans()),  # ns1 joins the queues, or leaves
    st.tuples(st.just("preempting"), st.integers(0, 5), st.integers(0, 2)),
)


def _candidate(number: int, raw: tuple[str | None, int, int, bool, str]) -> Candidate:
    label, cpu, space, placed, preempted_by = raw
    return candidate(f"w{number}", label, cpu=cpu, namespace=f"ns{space}", created=number,
                     placed="w1" if placed else "", preempted_by=preempted_by)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.integers(0, 5), _one, max_size=6),
    st.lists(st.lists(_change, max_size=4), min_size=1, max_size=4),
    st.integers(0, 6),
    st.none() | st.integers(0, 6),
)
def test_a_plan_from_the_last_sort_is_the_plan_from_nothing(
    first: dict[int, tuple[str | None, int, int, bool, str]],
    steps: list[list[tuple[Any, ...]]],
    free: int,
    hard: int | None,
) -> None:
    workloads = {f"w{n}": _candidate(n, raw) for n, raw in sorted(first.items())}
    labels: dict[str, dict[str, str]] = {"ns0": {"team": "a"}, "ns1": {}}
    preempting: dict[str, str] = {}
    kept = plan(_view(workloads, labels, preempting, free, hard, None))
    for changes in steps:
        for change in changes:
            what, *args = change
            if what == "new":
                workloads[f"w{args[0]}"] = _candidate(args[0], args[1])
            elif what == "gone":
                workloads.pop(f"w{args[0]}", None)
            elif what == "admitted" and f"w{args[0]}" in workloads:
                was = workloads[f"w{args[0]}"]
                workloads[was.key.name] = was._replace(admitted=not was.admitted)
            elif what == "labels":
                labels = {**labels, "ns1": {"team": "a"} if args[0] else {}}
            elif what == "preempting":
                preempting = {**preempting, f"w{args[0]}": f"Job ns0/w{args[1]}"}
        again = plan(_view(workloads, labels, preempting, free, hard, kept))
        afresh = plan(_view(workloads, labels, preempting, free, hard, kept, resort=True))
        assert _said(again) == _said(afresh)
        assert again.sorting is not None
        assert again.sorting.ordered == _in_queue_order(again), "each queue's order kept"
        every = list(again.entries.values())  # the figures as counted from every entry
        assert again.figures == queue_figures(SPECS, every, Fleet({"cpu": 16_000}))
        kept = again


def _in_queue_order(made: AdmissionPlan) -> dict[str, list[Entry]]:
    """Each queue's pending entries of a plan, sorted as the fair order sorts them."""
    by_queue: dict[str, list[Entry]] = {}
    for entry in made.entries.values():
        if entry.queue and not entry.admitted:
            by_queue.setdefault(entry.queue, []).append(entry)
    return {name: sorted(pending, key=queue_order) for name, pending in by_queue.items()}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 9), _one, max_size=10), st.integers(0, 6))
def test_the_fair_order_from_ordered_queues_is_the_one_it_sorts_itself(
    raw: dict[int, tuple[str | None, int, int, bool, str]], free: int
) -> None:
    workloads = {f"w{n}": _candidate(n, one) for n, one in sorted(raw.items())}
    made = plan(_view(workloads, {"ns0": {"team": "a"}, "ns1": {}}, {}, free, None, None))
    entries = list(made.entries.values())
    fleet = Fleet({"cpu": 16_000})
    itself = admission_pass(SPECS, entries, fleet, fits=room(free))
    ordered = admission_pass(SPECS, entries, fleet, fits=room(free),
                             ordered=_in_queue_order(made))  # fmt: skip
    assert ordered == itself


def test_nothing_changed_is_the_same_sort_and_a_change_sorts_only_its_workload() -> None:
    workloads = [candidate(f"w{n}", "q0", namespace="ns0", created=n) for n in range(3)]
    labels = {"ns0": {"team": "a"}}
    first = sort_view(workloads, SPECS, labels, {}, built={}, before=None)
    assert sort_view(list(workloads), SPECS, dict(labels), {}, built={}, before=first) is first
    moved = candidate("w1", "q1", namespace="ns0", created=1)
    again = sort_view([workloads[0], moved, workloads[2]], SPECS, labels, {}, built={},
                      before=first)  # fmt: skip
    assert again.view.built[key("w0", "ns0")] is first.view.built[key("w0", "ns0")]
    assert again.view.built[key("w1", "ns0")].queue == "q1"
    assert first.view.built[key("w1", "ns0")].queue == "q0"  # the last sort is left as it was
    gone = sort_view(workloads[:2], SPECS, labels, {}, built={}, before=first)
    assert key("w2", "ns0") not in gone.view.built and "Job ns0/w2" not in gone.view.pending
    assert key("w2", "ns0") in first.view.built


def test_a_requeued_victim_gone_no_longer_puts_its_winner_first() -> None:
    labels = {"ns0": {"team": "a"}, "ns1": {}}
    workloads = {
        "w0": _candidate(0, ("q0", 1, 0, False, "")),
        "w1": _candidate(1, ("q0", 1, 0, False, "")),
        "w2": _candidate(2, ("q0", 1, 0, False, "Job ns0/w1")),  # a victim back, w1 its winner
    }
    first = plan(_view(workloads, labels, {}, 1, None, None))
    assert [k.name for k in first.admitted] == ["w1"]  # the room its victim made is w1's
    del workloads["w2"]
    again = plan(_view(workloads, labels, {}, 1, None, first))
    assert [k.name for k in again.admitted] == ["w0"]  # the queue's order again
    assert _said(again) == _said(plan(_view(workloads, labels, {}, 1, None, first, resort=True)))
