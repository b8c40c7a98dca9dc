"""Victim choice: reclaim from queues above nominal, lower priority within a queue, only as
many as needed, never one that frees nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.admission.support import entry, fleet, queue, queues

from jobrelay.admission.preemption_rules import (
    marks_of,
    preempted_notice,
    preempting_notice,
    preemptions,
    victims_for,
    winner_mark,
)
from jobrelay.admission.queue_model import Entry, QueueSpec, Reclaim, WithinQueue
from jobrelay.admission.shares import usage_by_queue
from jobrelay.placement.units import resources_of


def cpu(value: str) -> dict[str, int]:
    return resources_of({"cpu": value})


def flooded(reclaim: Reclaim = Reclaim.ANY, count: int = 32) -> tuple[dict, list[Entry]]:
    """A (nominal 16) runs ``count`` 1-CPU Jobs; B (nominal 16) may reclaim."""
    known = queues(queue("a", nominal={"cpu": "16"}), queue("b", nominal={"cpu": "16"},
                                                              reclaim=reclaim))  # fmt: skip
    running = [entry(f"a{i}", "a", created=i, admitted=True) for i in range(count)]
    return known, running


def test_reclaim_takes_the_newest_of_a_queue_above_its_nominal() -> None:
    known, running = flooded()
    winner = entry("w", "b", created=99)
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("1")) == ("Job a/a31",)
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("3")) == (
        "Job a/a31", "Job a/a30", "Job a/a29",
    )  # fmt: skip


def test_reclaim_takes_the_lowest_priority_first() -> None:
    known, running = flooded()
    running[3] = entry("low", "a", priority=-5, created=3, admitted=True)
    winner = entry("w", "b")
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("1")) == ("Job a/low",)


def test_reclaim_never_takes_a_queue_below_its_nominal() -> None:
    known, running = flooded(count=18)  # two above its 16
    winner = entry("w", "b", cpu="2")
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("2")) is not None
    big = entry("w", "b", cpu="3")
    assert victims_for(big, known, [*running, big], fleet(), need=cpu("3")) is None


def test_reclaim_only_when_the_winners_queue_stays_within_nominal() -> None:
    known, running = flooded()
    own = [entry(f"b{i}", "b", admitted=True) for i in range(16)]  # b is at its nominal
    winner = entry("w", "b")
    assert victims_for(winner, known, [*running, *own, winner], fleet(), need=cpu("1")) is None


def test_reclaim_never_and_lower_priority() -> None:
    known, running = flooded(Reclaim.NEVER)
    winner = entry("w", "b", priority=10)
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("1")) is None
    known, running = flooded(Reclaim.LOWER_PRIORITY)
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("1")) == ("Job a/a31",)
    equal = entry("w", "b", priority=0)
    assert victims_for(equal, known, [*running, equal], fleet(), need=cpu("1")) is None


def test_within_queue_displaces_lower_priority_lowest_then_newest() -> None:
    known = queues(queue("a", within=WithinQueue.LOWER_PRIORITY))
    running = [
        entry("p5-old", "a", priority=5, created=1, admitted=True),
        entry("p1-old", "a", priority=1, created=2, admitted=True),
        entry("p1-new", "a", priority=1, created=3, admitted=True),
        entry("p9", "a", priority=9, created=4, admitted=True),
    ]
    winner = entry("w", "a", priority=9, created=9)
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("2")) == (
        "Job a/p1-new", "Job a/p1-old",
    )  # fmt: skip
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("4")) is None
    never = queues(queue("a"))
    assert victims_for(winner, never, [*running, winner], fleet(), need=cpu("1")) is None


def test_only_as_many_victims_as_needed() -> None:
    known = queues(queue("a", within=WithinQueue.LOWER_PRIORITY))
    running = [
        entry("small", "a", cpu="1", created=5, admitted=True),  # newest: tried first
        entry("large", "a", cpu="4", created=1, admitted=True),
    ]
    winner = entry("w", "a", priority=1)
    # small then large cover 4; without small, large alone still does: small is dropped.
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("4")) == (
        "Job a/large",
    )


def test_never_a_victim_that_frees_nothing_needed() -> None:
    known = queues(queue("a", within=WithinQueue.LOWER_PRIORITY))
    running = [entry("gpu", "a", cpu="0", gpu=1, created=5, admitted=True)]
    winner = entry("w", "a", priority=1)
    assert victims_for(winner, known, [*running, winner], fleet(), need=cpu("1")) is None
    assert victims_for(winner, known, [*running, winner], fleet(), need={"cpu": 0}) == ()


def test_the_events_say_by_whom_and_why_never_naming_another_tenants_workload() -> None:
    victim = entry("a31", "team-a", admitted=True)
    winner = entry("x", "team-b")  # of namespace team-b
    preempted = preempted_notice(victim, winner)
    assert preempted.reason == "Preempted"
    assert "preempted by a workload of queue team-b (" in preempted.message
    assert "to reclaim team-b's nominal quota" in preempted.message
    assert "team-b/x" not in preempted.message
    assert winner_mark(winner, victim) == marks_of(winner)[1] != winner.key
    near = entry("y", "team-b", namespace="team-a")  # another queue, the victim's namespace
    assert "preempted by Job team-a/y to reclaim" in preempted_notice(victim, near).message
    assert winner_mark(near, victim) == near.key == marks_of(near)[0]
    same = preempted_notice(victim, entry("y", "team-a", priority=7))
    assert "preempted by Job team-a/y of higher priority (7 over 0) in team-a" in same.message
    own = entry("w", "team-b", namespace="team-a")
    preempting = preempting_notice(own, [f"Job team-a/{i}" for i in range(7)])
    assert preempting.reason == "Preempting"
    assert "preempting Job team-a/0" in preempting.message and "and 2 more" in preempting.message
    mixed = preempting_notice(own, ["Job team-a/1", "Job team-c/secret", "Job team-d/x"])
    assert mixed.message == (
        "preempting Job team-a/1 and 2 workloads of other namespaces to make room in team-b"
    )
    assert "secret" not in preempting_notice(winner, ["Job team-c/secret"]).message


running_entries = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 4), st.integers(0, 3), st.integers(-2, 2)),
    max_size=30,
)  # (queue, cpu, gpu, priority)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.sampled_from(list(Reclaim)),
                       st.sampled_from(list(WithinQueue))), min_size=3, max_size=3),
    running_entries, st.integers(0, 2), st.integers(-2, 3), st.integers(0, 10), st.integers(0, 4),
)  # fmt: skip
def test_victims_always_make_room_and_are_all_needed(
    specs: list, raw: list, winner_queue: int, winner_priority: int, need_cpu: int, need_gpu: int
) -> None:
    known: dict[str, QueueSpec] = queues(
        *(
            queue(f"q{i}", nominal={"cpu": str(n), "nvidia.com/gpu": str(n // 3)},
                  reclaim=reclaim, within=within)
            for i, (n, reclaim, within) in enumerate(specs)
        )
    )  # fmt: skip
    running = [
        entry(f"r{n}", f"q{q}", cpu=str(c), gpu=g, priority=p, created=n, admitted=True)
        for n, (q, c, g, p) in enumerate(raw)
    ]
    winner = entry("w", f"q{winner_queue}", cpu="1", priority=winner_priority, created=99)
    need = {"cpu": need_cpu * 1000, "nvidia.com/gpu": need_gpu}
    chosen = victims_for(winner, known, [*running, winner], fleet(), need=need)
    if chosen is None:
        return
    by_key = {e.key: e for e in running}
    victims = [by_key[key] for key in chosen]
    needed = {r: v for r, v in need.items() if v > 0}

    def freed(of: list[Entry]) -> dict[str, int]:
        return {r: sum(e.requests.get(r, 0) for e in of) for r in needed}

    assert all(freed(victims)[r] >= v for r, v in needed.items())
    for victim in victims:
        assert any(victim.requests.get(r, 0) > 0 for r in needed)  # it makes room
        rest = [v for v in victims if v is not victim]
        assert not all(freed(rest)[r] >= v for r, v in needed.items())  # and is needed
        if victim.queue == winner.queue:
            assert victim.priority < winner.priority
            assert known[winner.queue].within_queue is WithinQueue.LOWER_PRIORITY
        else:
            assert known[winner.queue].reclaim is not Reclaim.NEVER
            if known[winner.queue].reclaim is Reclaim.LOWER_PRIORITY:
                assert victim.priority < winner.priority
    # No other queue is taken below its nominal in what is needed.
    after = usage_by_queue(e for e in running if e.key not in chosen)
    before = usage_by_queue(running)
    for name, spec in known.items():
        if name == winner.queue:
            continue
        for resource in needed:
            if after.get(name, {}).get(resource, 0) < before.get(name, {}).get(resource, 0):
                assert after.get(name, {}).get(resource, 0) >= spec.nominal.get(resource, 0)


def test_several_winners_take_distinct_victims_up_to_their_nominal() -> None:
    # a (nominal 8) runs 32 of a 32-CPU fleet; b (nominal 16) reclaims up to its 16.
    known = queues(queue("a", nominal={"cpu": "8"}), queue("b", nominal={"cpu": "16"},
                                                             reclaim=Reclaim.ANY))  # fmt: skip
    running = [entry(f"a{i}", "a", created=i, admitted=True) for i in range(32)]
    winners = [entry(f"w{i}", "b", created=100 + i) for i in range(20)]
    chosen = preemptions(winners, known, [*running, *winners], fleet(), need_of=lambda w: cpu("1"))
    assert list(chosen) == [f"Job b/w{i}" for i in range(16)]  # b reaches its nominal 16
    victims = [key for keys in chosen.values() for key in keys]
    assert len(victims) == len(set(victims)) == 16
    assert victims[0] == "Job a/a31" and victims[-1] == "Job a/a16"  # newest first
