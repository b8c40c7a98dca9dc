"""Preemption planned over the fleet's clusters: room is made on one cluster, quota within
the winner's queue, what is already leaving counts as free, each victim taken once."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import entry, fleet, queue, queues

from jobrelay.admission.preemption_rules import Shortfall, plan_preemptions
from jobrelay.admission.queue_model import Entry, Reclaim, WithinQueue
from jobrelay.placement.units import resources_of


def cpu(value: str) -> dict[str, int]:
    return resources_of({"cpu": value})


def on(cluster: str, item: Entry, **changes: object) -> Entry:
    return dataclasses.replace(item, cluster=cluster, **changes)  # type: ignore[arg-type]


def reclaim_fleet() -> tuple[dict, list[Entry]]:
    """a (nominal 16) runs 32 1-CPU Jobs on two full 16-CPU clusters; b may reclaim."""
    known = queues(queue("a", nominal={"cpu": "16"}),
                   queue("b", nominal={"cpu": "16"}, reclaim=Reclaim.ANY))  # fmt: skip
    running = [
        on("w1" if i % 2 else "w2", entry(f"a{i}", "a", created=i, admitted=True))
        for i in range(32)
    ]
    return known, running


FULL = {"w1": cpu("0"), "w2": cpu("0")}


def keys(found: list) -> list[tuple[str, tuple[str, ...], str]]:
    return [(p.winner.key, tuple(v.key for v in p.victims), p.cluster) for p in found]


def test_room_is_made_on_one_cluster_newest_first() -> None:
    known, running = reclaim_fleet()
    winner = entry("w", "b", cpu="2", created=99)
    found = plan_preemptions([(winner, Shortfall.ROOM)], known, [*running, winner], fleet(),
                             free=FULL)  # fmt: skip
    # w1 holds the odd ones (newest a31, a29), w2 the even (a30, a28): fewest, then name.
    assert keys(found) == [("Job b/w", ("Job a/a31", "Job a/a29"), "w1")]


def test_nothing_is_preempted_when_a_cluster_has_the_room_or_it_is_leaving() -> None:
    known, running = reclaim_fleet()
    winner = entry("w", "b", created=99)
    roomy = {"w1": cpu("0"), "w2": cpu("1")}
    assert plan_preemptions([(winner, Shortfall.ROOM)], known, [*running, winner], fleet(),
                            free=roomy) == []  # fmt: skip
    leaving = [on(e.cluster, e, leaving=True) if e.key == "Job a/a31" else e for e in running]
    assert plan_preemptions([(winner, Shortfall.ROOM)], known, [*leaving, winner], fleet(),
                            free=FULL) == []  # fmt: skip


def test_a_leaving_victim_is_never_chosen_again() -> None:
    known, running = reclaim_fleet()
    winner = entry("w", "b", cpu="2", created=99)
    leaving = [on(e.cluster, e, leaving=True) if e.key == "Job a/a31" else e for e in running]
    found = plan_preemptions([(winner, Shortfall.ROOM)], known, [*leaving, winner], fleet(),
                             free=FULL)  # fmt: skip
    # a31 frees one CPU on w1 already: one more is needed there (a29), fewer than on w2.
    assert keys(found) == [("Job b/w", ("Job a/a29",), "w1")]


def test_only_clusters_the_winner_may_go_to() -> None:
    known, running = reclaim_fleet()
    winner = entry("w", "b", cpu="2", created=99)
    found = plan_preemptions([(winner, Shortfall.ROOM)], known, [*running, winner], fleet(),
                             free=FULL, clusters_for=lambda _e: {"w2"})  # fmt: skip
    assert keys(found) == [("Job b/w", ("Job a/a30", "Job a/a28"), "w2")]
    assert plan_preemptions([(winner, Shortfall.ROOM)], known, [*running, winner], fleet(),
                            free=FULL, clusters_for=lambda _e: set()) == []  # fmt: skip


def test_never_a_workload_that_must_run_at_most_once() -> None:
    known, running = reclaim_fleet()
    winner = entry("w", "b", created=99)
    pinned = [dataclasses.replace(e, preemptible=False) for e in running]
    assert plan_preemptions([(winner, Shortfall.ROOM)], known, [*pinned, winner], fleet(),
                            free=FULL) == []  # fmt: skip


def test_several_winners_share_the_room_they_make() -> None:
    known, running = reclaim_fleet()
    winners = [entry(f"w{i}", "b", created=100 + i) for i in range(20)]
    found = plan_preemptions([(w, Shortfall.ROOM) for w in winners], known,
                             [*running, *winners], fleet(), free=FULL)  # fmt: skip
    # b reclaims up to its nominal 16, one victim each, never one twice.
    assert len(found) == 16
    victims = [v.key for p in found for v in p.victims]
    assert len(set(victims)) == 16 and all(len(p.victims) == 1 for p in found)


def test_quota_within_the_queue_lowest_priority_newest_first() -> None:
    known = queues(queue("q", nominal={"cpu": "4"}, borrowing={"cpu": "0"},
                         within=WithinQueue.LOWER_PRIORITY),
                   queue("o", nominal={"cpu": "4"}))  # fmt: skip
    running = [on("w1", entry(f"low{i}", "q", created=i, admitted=True)) for i in range(4)]
    others = [on("w1", entry(f"o{i}", "o", created=i, priority=-5, admitted=True))
              for i in range(4)]  # fmt: skip
    winner = entry("high", "q", priority=10, created=99)
    found = plan_preemptions([(winner, Shortfall.QUOTA)], known, [*running, *others, winner],
                             fleet(), free={"w1": cpu("0")})  # fmt: skip
    assert keys(found) == [("Job q/high", ("Job q/low3",), "")]  # never another queue's


def test_queues_without_preemption_take_nothing() -> None:
    known = queues(queue("a", nominal={"cpu": "16"}), queue("b", nominal={"cpu": "16"}))
    running = [on("w1", entry(f"a{i}", "a", created=i, admitted=True)) for i in range(32)]
    winner = entry("w", "b", created=99)
    assert plan_preemptions([(winner, Shortfall.ROOM)], known, [*running, winner], fleet(),
                            free={"w1": cpu("0")}) == []  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(1, 3),
                       st.integers(-2, 2), st.booleans()), max_size=24),
    st.lists(st.tuples(st.integers(1, 4), st.integers(-2, 3)), min_size=1, max_size=5),
    st.sampled_from(list(Reclaim)), st.sampled_from(list(WithinQueue)),
    st.lists(st.integers(0, 3), min_size=3, max_size=3),
)  # fmt: skip
def test_each_preemption_makes_room_on_its_cluster_and_each_victim_is_needed(
    raw: list, asks: list, reclaim: Reclaim, within: WithinQueue, free_cpus: list
) -> None:
    known = queues(queue("q0", nominal={"cpu": "4"}),
                   queue("q1", nominal={"cpu": "6"}, reclaim=reclaim, within=within))  # fmt: skip
    running = [
        on(f"c{c}", entry(f"r{n}", f"q{q}", cpu=str(size), priority=p, created=n,
                          admitted=True), leaving=leaving)
        for n, (q, c, size, p, leaving) in enumerate(raw)
    ]  # fmt: skip
    winners = [entry(f"w{n}", "q1", cpu=str(c), priority=p, created=100 + n)
               for n, (c, p) in enumerate(asks)]  # fmt: skip
    free = {f"c{i}": cpu(str(n)) for i, n in enumerate(free_cpus)}
    found = plan_preemptions([(w, Shortfall.ROOM) for w in winners], known,
                             [*running, *winners], fleet(), free=free)  # fmt: skip
    taken: set[str] = set()
    room = {c: dict(v) for c, v in free.items()}
    for e in running:
        if e.leaving:
            room[e.cluster]["cpu"] = room[e.cluster].get("cpu", 0) + e.requests["cpu"]
    by_winner = {p.winner.key: p for p in found}
    for winner in winners:
        if winner.key not in by_winner:
            # Room there already (the first cluster by name that has it): it takes it.
            ask = winner.requests["cpu"]
            there = [c for c in sorted(room) if room[c].get("cpu", 0) >= ask]
            if there:
                room[there[0]]["cpu"] -= ask
            continue
        preemption = by_winner[winner.key]
        victims = preemption.victims
        assert victims and all(not v.leaving and v.cluster == preemption.cluster for v in victims)
        assert not taken & {v.key for v in victims}
        taken |= {v.key for v in victims}
        ask = preemption.winner.requests["cpu"]
        here = room[preemption.cluster].get("cpu", 0)
        freed = sum(v.requests["cpu"] for v in victims)
        assert here < ask <= here + freed  # it needed room, and the victims make it
        for victim in victims:  # and each is needed
            assert here + freed - victim.requests["cpu"] < ask
        room[preemption.cluster]["cpu"] = here + freed - ask
