"""The admission plan, ``plan(view) -> AdmissionPlan``: who is admitted and in which order,
why each other waits (and where), whom to preempt, the queues' figures. Tables, then
properties over random views."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import queue, queues

from jobrelay.admission.fair_order import QUEUE_QUOTA_EXCEEDED, WAITING_FOR_ROOM
from jobrelay.admission.namespace_quota import NAMESPACE_QUOTA_EXCEEDED, read_hard
from jobrelay.admission.planner import AdmissionPlan, AdmissionView, Candidate, ClustersFor, plan
from jobrelay.admission.preemption_rules import PREEMPTING
from jobrelay.admission.queue_model import (
    Entry,
    Fleet,
    LabelSelector,
    Preempt,
    QueueSpec,
    Reclaim,
)
from jobrelay.admission.workload_reads import WorkloadRead, fit_likeness
from jobrelay.kinds.base import WorkloadKey
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import PodGroup, Workload

KIND = "Job.v1.batch"


def key(name: str, namespace: str = "ns") -> WorkloadKey:
    return WorkloadKey(KIND, f"{namespace}/{name}")


def candidate(
    name: str,
    label: str | None = None,
    *,
    cpu: int = 1,
    namespace: str = "ns",
    created: int = 0,
    priority: int = 0,
    placed: str = "",
    admitted: bool | None = None,
    preempted_by: str = "",
    readable: bool = True,
    group: str = "main",
) -> Candidate:
    """A workload as admission reads it: ``label`` names its queue; placed on ``placed``."""
    workload = Workload((PodGroup(group, 1, resources_of({"cpu": str(cpu)})),))
    entry = Entry(
        key=f"Job {namespace}/{name}", queue="", namespace=namespace, priority=priority,
        created=f"2026-01-01T00:00:{created:02d}Z", requests=workload.demand,
        likeness=fit_likeness("Job", workload),
    )  # fmt: skip
    read = WorkloadRead(
        key(name, namespace), ("1", 0), workload if readable else None, entry if readable else None,
        cluster=placed, named=label, preempted_by=preempted_by,
    )  # fmt: skip
    return Candidate(key(name, namespace), read, bool(placed) if admitted is None else admitted)


PICKY = "picky"  # a pod group no cluster takes, whatever the room


class Room:
    """One pool of free CPUs (whole CPUs) each admission takes from; a group named
    ``PICKY`` fits nowhere."""

    def __init__(self, cpu: int) -> None:
        self.free = cpu * 1000
        self.asked: list[str] = []

    def fits(self, at: WorkloadKey, workload: Workload) -> bool:
        self.asked.append(at.name)
        asked = workload.demand.get("cpu", 0)
        if asked > self.free or workload.groups[0].name == PICKY:
            return False
        self.free -= asked
        return True


def view(
    *candidates: Candidate,
    specs: Mapping[str, QueueSpec] | None = None,
    held: tuple[str, ...] = (),
    free: int = 100,
    quotas: Mapping[str, Mapping[str, str]] | None = None,
    labels: Mapping[str, Mapping[str, str]] | None = None,
    **more: object,
) -> AdmissionView:
    return AdmissionView(
        specs=specs or {},
        namespace_labels=labels or {},
        quotas={ns: read_hard(hard) for ns, hard in (quotas or {}).items()},
        fleet=Fleet({"cpu": 100_000}),
        workloads=candidates,
        held=[key(name) for name in held],
        fits=Room(free).fits,
        **more,  # type: ignore[arg-type]
    )


def names(keys: Collection[WorkloadKey]) -> list[str]:
    return [k.name for k in keys]


def test_without_queues_or_quotas_the_held_are_admitted_oldest_first_while_they_fit() -> None:
    made = plan(view(candidate("a", cpu=2), candidate("b", cpu=2), candidate("c", cpu=1),
                     held=("b", "a", "c"), free=3))  # fmt: skip
    assert names(made.admitted) == ["b", "c"] and names(made.wake) == ["b", "c"]
    assert made.figures == {} and made.fairness_error is None
    assert made.victims == {} and not made.waits("Job ns/a")


def test_only_the_held_unqueued_ones_are_admitted() -> None:
    # "b" is pending but not held (its reconcile has not looked at it yet), "c" is placed.
    made = plan(view(candidate("a"), candidate("b"), candidate("c", placed="w1"), held=("a",)))
    assert names(made.admitted) == ["a"]
    assert [e.key for e in made.by_namespace["ns"]] == ["Job ns/c", "Job ns/a"]


def test_a_queue_admits_within_its_ceiling_and_says_where_the_rest_wait() -> None:
    specs = queues(queue("q", nominal={"cpu": "2"}, borrowing={"cpu": "0"}))
    made = plan(view(*(candidate(f"j{i}", "q", created=i) for i in range(4)), specs=specs))
    assert names(made.admitted) == ["j0", "j1"]
    assert made.admitted_entries == {"Job ns/j0", "Job ns/j1"}
    assert made.waits("Job ns/j3") and not made.waits("Job ns/j0")
    held = made.hold("Job ns/j3")
    assert held.reason == QUEUE_QUOTA_EXCEEDED and held.settled
    assert held.message.endswith("(position 2 in queue q)")
    figures = made.figures["q"]
    assert (figures.pending, figures.admitted) == (4, 0)  # as the caches showed them
    assert made.fairness_error is not None


def test_a_label_naming_no_queue_is_neither_queued_nor_admitted() -> None:
    made = plan(view(candidate("a", "nowhere"), specs=queues(queue("q")), held=("a",)))
    assert made.admitted == () and not made.waits("Job ns/a")
    assert made.queue_of == {}


def test_a_namespace_selector_queues_unlabelled_workloads() -> None:
    specs = queues(queue("q", labels={"team": "a"}))
    made = plan(view(candidate("a"), candidate("b", namespace="other"), specs=specs,
                     labels={"ns": {"team": "a"}}, held=("a",)))  # fmt: skip
    assert names(made.admitted) == ["a"]
    assert made.queue_of == {"Job ns/a": "q"}


def test_no_room_holds_waiting_for_room() -> None:
    made = plan(view(candidate("a", "q", cpu=4), specs=queues(queue("q")), free=2))
    assert made.admitted == ()
    assert made.hold("Job ns/a").reason == WAITING_FOR_ROOM


@pytest.mark.parametrize("queued", [True, False])
def test_a_namespace_quota_counts_the_admitted_ones(queued: bool) -> None:
    label = "q" if queued else None
    workloads = [candidate("run", label, cpu=2, placed="w1"),
                 candidate("a", label, cpu=1, created=1), candidate("b", label, cpu=1, created=2)]  # fmt: skip
    made = plan(view(*workloads, specs=queues(queue("q")), held=("a", "b"),
                     quotas={"ns": {"requests.cpu": "3"}}))  # fmt: skip
    assert names(made.admitted) == ["a"]
    assert made.hold("Job ns/b").reason == NAMESPACE_QUOTA_EXCEEDED
    assert sorted(e.key for e in made.by_namespace["ns"]) == ["Job ns/a", "Job ns/run"]


def test_a_workload_placement_cannot_read_is_left_out() -> None:
    made = plan(view(candidate("a", "q", readable=False), specs=queues(queue("q")), held=("a",)))
    assert made.admitted == () and made.entries == {} and not made.waits("Job ns/a")


def test_entries_that_did_not_change_are_the_ones_built_before() -> None:
    workloads = (candidate("a", "q"), candidate("b", "q", placed="w1"))
    first = plan(view(*workloads, specs=queues(queue("q")), free=0))
    again = plan(view(*workloads, specs=queues(queue("q")), free=0, built=first.entries))
    assert all(again.entries[k] is first.entries[k] for k in first.entries)
    moved = plan(view(candidate("a", "q"), candidate("b", "q", placed="w2"),
                      specs=queues(queue("q")), free=0, built=first.entries))  # fmt: skip
    assert moved.entries[key("a")] is first.entries[key("a")]
    assert moved.entries[key("b")] is not first.entries[key("b")]
    assert moved.entries[key("b")].cluster == "w2"
    # Read otherwise by placement (another pod group), its entry is made anew.
    regrouped = plan(view(candidate("a", "q", group="other"), candidate("b", "q"),
                          specs=queues(queue("q")), free=0, built=first.entries))  # fmt: skip
    assert regrouped.entries[key("a")] is not first.entries[key("a")]
    assert regrouped.entries[key("a")].likeness != first.entries[key("a")].likeness


def test_a_run_of_alike_workloads_that_fit_nowhere_is_asked_about_once() -> None:
    room = Room(2)
    workloads = [candidate(f"big{i}", "q", cpu=4, created=i) for i in range(3)]
    workloads.append(candidate("small", "q", cpu=1, created=5))
    made = plan(dataclasses.replace(view(*workloads, specs=queues(queue("q"))), fits=room.fits))
    assert names(made.admitted) == ["small"]
    assert room.asked == ["big0", "small"]
    for i, position in ((0, 1), (1, 2), (2, 3)):
        held = made.hold(f"Job ns/big{i}")
        assert held.reason == WAITING_FOR_ROOM
        assert held.message.endswith(f"(position {position} in queue q)")


def test_a_workload_asking_the_same_but_read_otherwise_by_placement_is_asked_about() -> None:
    # Same requests, another pod group: placement reads it otherwise (another likeness).
    room = Room(8)
    workloads = [candidate("picky", "q", group=PICKY), candidate("plain", "q", created=1),
                 candidate("picky2", "q", group=PICKY, created=2)]  # fmt: skip
    made = plan(dataclasses.replace(view(*workloads, specs=queues(queue("q"))), fits=room.fits))
    assert names(made.admitted) == ["plain"]
    assert room.asked == ["picky", "plain", "picky2"]


def test_under_a_namespace_quota_each_alike_workload_is_judged_and_told() -> None:
    room = Room(0)
    workloads = [candidate(f"j{i}", "q", created=i) for i in range(3)]
    made = plan(dataclasses.replace(
        view(*workloads, specs=queues(queue("q")), quotas={"ns": {"requests.cpu": "8"}}),
        fits=room.fits,
    ))  # fmt: skip
    assert made.admitted == () and room.asked == ["j0", "j1", "j2"]


def _reclaiming() -> dict[str, QueueSpec]:
    return queues(queue("a", nominal={"cpu": "2"}), queue("b", nominal={"cpu": "2"},
                                                          reclaim=Reclaim.ANY))  # fmt: skip


def _full(*, leaving: str = "") -> list[Candidate]:
    """Queue a borrowed the whole 4-CPU fleet (on w1); b0 of queue b waits."""
    running = [candidate(f"a{i}", "a", created=i, placed="w1",
                         preempted_by="Job ns/b0" if f"a{i}" == leaving else "")
               for i in range(4)]  # fmt: skip
    return [*running, candidate("b0", "b", created=9)]


def _room(free: int = 0) -> tuple[Mapping[str, Mapping[str, int]], ClustersFor]:
    return {"w1": {"cpu": free * 1000}}, lambda _key, _workload: ("w1",)


def test_a_queue_below_its_nominal_preempts_the_newest_of_one_above() -> None:
    made = plan(view(*_full(), specs=_reclaiming(), free=0, room=_room))
    assert made.admitted == ()
    assert list(made.victims) == [key("a3")]
    assert made.victims[key("a3")].by == "Job ns/b0"
    assert "to reclaim b's nominal quota" in made.victims[key("a3")].message
    assert names(made.wake) == ["a3"]
    told = made.hold("Job ns/b0")
    assert (told.reason, told.event_type) == (PREEMPTING, "Normal")
    assert "Job ns/a3" in told.message


def test_a_victim_leaving_is_not_chosen_again_and_its_winner_stays_preempting() -> None:
    # a3 carries its mark already; the room it frees is as good as free: nobody else goes.
    made = plan(view(*_full(leaving="a3"), specs=_reclaiming(), free=0, room=_room))
    assert made.victims == {}
    assert made.entries[key("a3")].leaving
    assert made.hold("Job ns/b0").reason == PREEMPTING
    # Told by an earlier plan, not marked yet: the same.
    told = {key("a3"): Preempt("Job ns/b0", "preempted")}
    again = plan(view(*_full(), specs=_reclaiming(), free=0, room=_room, preempting=told))
    assert again.victims == {} and again.hold("Job ns/b0").reason == PREEMPTING


def test_without_room_asked_nobody_is_preempted() -> None:
    made = plan(view(*_full(), specs=_reclaiming(), free=0))
    assert made.victims == {} and made.hold("Job ns/b0").reason == WAITING_FOR_ROOM


def test_the_wake_order_is_admitted_queued_then_victims_then_unqueued() -> None:
    specs = {**_reclaiming(), "c": queue("c", labels={"team": "t"})}
    specs = {name: dataclasses.replace(spec, namespace_selector=LabelSelector({"team": "t"}))
             for name, spec in specs.items()}  # fmt: skip
    # u0's namespace is no queue's: it is placed as without queues.
    workloads = [*_full(), candidate("c0", "c", cpu=0), candidate("u0", cpu=0, namespace="free")]
    made = plan(view(*workloads, specs=specs, free=0, room=_room, labels={"ns": {"team": "t"}},
                     held=()))  # fmt: skip
    assert names(made.wake) == ["c0", "a3"]
    unqueued = dataclasses.replace(
        view(*workloads, specs=specs, free=0, room=_room, labels={"ns": {"team": "t"}}),
        held=[key("u0", "free")],
    )
    made = plan(unqueued)
    assert names(made.wake) == ["c0", "a3", "u0"]
    assert names(made.admitted) == ["c0", "u0"]


# -- properties ----------------------------------------------------------------------------

_workloads = st.lists(
    st.tuples(
        st.sampled_from([None, "q0", "q1", "nowhere"]),  # its label
        st.integers(0, 4),  # cpu
        st.integers(0, 1),  # namespace
        st.sampled_from(["", "", "w1"]),  # placed
        st.integers(0, 2),  # priority
        st.booleans(),  # held
    ),
    max_size=30,
)


def _random_view(raw: list, nominal: int, hard: int | None, free: int) -> AdmissionView:
    # Both queues take namespace ns0 only: ns1's unlabelled workloads are in no queue.
    specs = queues(
        queue("q0", nominal={"cpu": str(nominal)}, borrowing={"cpu": "2"}, labels={"team": "a"}),
        queue("q1", weight=2, reclaim=Reclaim.ANY, nominal={"cpu": "1"}, labels={"team": "a"}),
    )
    workloads = [
        candidate(f"w{n}", label, cpu=cpu, namespace=f"ns{space}", created=n, placed=placed,
                  priority=priority)
        for n, (label, cpu, space, placed, priority, _held) in enumerate(raw)
    ]  # fmt: skip
    held = [c.key for c, (*_, is_held) in zip(workloads, raw, strict=True) if is_held]
    return AdmissionView(
        specs=specs,
        namespace_labels={"ns0": {"team": "a"}, "ns1": {}},
        quotas={}
        if hard is None
        else {ns: read_hard({"requests.cpu": str(hard)}) for ns in ("ns0", "ns1")},
        fleet=Fleet({"cpu": 16_000}),
        workloads=workloads,
        held=held,
        fits=Room(free).fits,
        room=lambda: ({"w1": {"cpu": 0}}, lambda _key, _workload: ("w1",)),
    )


@settings(max_examples=150, deadline=None)
@given(_workloads, st.integers(0, 6), st.none() | st.integers(0, 8), st.integers(0, 16))
def test_a_plan_admits_only_pending_ones_and_says_why_every_other_queued_one_waits(
    raw: list, nominal: int, hard: int | None, free: int
) -> None:
    made = plan(_random_view(raw, nominal, hard, free))
    by_key = {c.key: c for c in _random_view(raw, nominal, hard, free).workloads}
    admitted = set(made.admitted)
    assert len(admitted) == len(made.admitted)  # each once
    assert all(not by_key[k].admitted for k in admitted)
    assert not admitted & set(made.victims)
    assert all(by_key[k].admitted and by_key[k].read.cluster for k in made.victims)
    # The wake order: admitted ones and victims, each once.
    assert sorted(made.wake) == sorted([*made.admitted, *made.victims])
    for c in by_key.values():
        entry = made.entries[c.key]
        if c.admitted or not entry.queue:
            continue
        # Every pending queued one is admitted or waits, never both.
        assert (c.key in admitted) != made.waits(entry.key)
        if made.waits(entry.key):
            assert made.hold(entry.key).reason
    # Nobody is admitted from a label naming no queue; unqueued ones only when held.
    for k in admitted:
        entry = made.entries[k]
        assert by_key[k].read.named != "nowhere"
        held = _random_view(raw, nominal, hard, free).held
        assert entry.queue or k in held


@settings(max_examples=150, deadline=None)
@given(_workloads, st.integers(0, 6), st.integers(0, 8), st.integers(0, 16))
def test_a_plan_never_takes_a_namespace_above_its_quota(
    raw: list, nominal: int, hard: int, free: int
) -> None:
    made = plan(_random_view(raw, nominal, hard, free))
    placed = sum(
        e.requests.get("cpu", 0)
        for e in made.entries.values()
        if e.admitted and e.namespace == "ns0"
    )
    added = sum(
        made.entries[k].requests.get("cpu", 0) for k in made.admitted if k.namespace == "ns0"
    )
    if added:
        assert placed + added <= hard * 1000


@settings(max_examples=100, deadline=None)
@given(_workloads, st.integers(0, 6), st.none() | st.integers(0, 8), st.integers(0, 16))
def test_figures_count_what_the_caches_show_and_positions_number_each_queue(
    raw: list, nominal: int, hard: int | None, free: int
) -> None:
    made: AdmissionPlan = plan(_random_view(raw, nominal, hard, free))
    for name, figures in made.figures.items():
        mine = [e for e in made.entries.values() if e.queue == name]
        assert figures.admitted == sum(e.admitted for e in mine)
        assert figures.pending == sum(not e.admitted for e in mine)
        places = sorted(p for k, p in made.positions.items() if made.queue_of[k] == name)
        assert places == list(range(1, len(places) + 1))
    assert made.fairness_error is not None and made.fairness_error >= 0
    # The same view, the same plan.
    again = plan(_random_view(raw, nominal, hard, free))
    assert (again.admitted, dict(again.victims)) == (made.admitted, dict(made.victims))
