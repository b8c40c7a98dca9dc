"""The pass over held workloads: oldest first, each taking its room before the next."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.placement.support import cluster, node, pods

from jobrelay.placement import held as held_pass
from jobrelay.placement.held import placeable
from jobrelay.placement.workload import Choice, Workload


def test_freed_room_wakes_only_the_workloads_it_can_take_oldest_first() -> None:
    clusters = [cluster("w", node("n1", "4"), node("n2", "4", used={"cpu": "3"}))]
    held = [
        ("big", pods(1, cpu="8"), Choice()),  # fits no node: stays held
        ("a", pods(1, cpu="3"), Choice()),
        ("b", pods(1, cpu="2"), Choice()),  # n1 has 1 CPU left after a; n2 has 1
        ("c", pods(1, cpu="1"), Choice()),
    ]
    assert placeable(held, clusters) == ["a", "c"]


def test_a_namespace_policy_is_kept_in_the_pass() -> None:
    clusters = [cluster("w1", node("n", "4")), cluster("w2", node("m", "4"))]
    held = [("a", pods(1, cpu="1"), Choice(clusters=("w3",)))]
    assert placeable(held, clusters) == []


@given(st.lists(st.integers(1, 6), max_size=30))
def test_the_pass_never_wakes_more_than_fits(cpus: list[int]) -> None:
    clusters = [cluster("w", node("n1", "8"), node("n2", "8"))]
    held = [(str(i), pods(1, cpu=str(c)), Choice()) for i, c in enumerate(cpus)]
    woken = placeable(held, clusters)
    assert sum(cpus[int(k)] for k in woken) <= 16  # type: ignore[call-overload]
    assert woken == sorted(woken, key=int)  # type: ignore[arg-type]


def test_a_workloads_likeness_is_its_repr_made_once_and_neither_compared_nor_shown() -> None:
    one, same, other = pods(2, cpu="1"), pods(2, cpu="1"), pods(2, cpu="2")
    assert one._likeness is None  # made on first use, not when read
    assert one.likeness == repr(one) == same.likeness
    assert one._likeness == repr(one)  # kept: the next look does not make it again
    assert one.likeness is same.likeness  # interned: a template's thousands share one
    assert other.likeness != one.likeness
    assert one == same and "_likeness" not in repr(one)


def test_a_workload_like_one_no_cluster_took_is_refused_without_placing_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    placed: list[Workload] = []
    real_place = held_pass.place

    def counting(clusters: Any, workload: Workload, *args: Any, **kwargs: Any) -> Any:
        placed.append(workload)
        return real_place(clusters, workload, *args, **kwargs)

    monkeypatch.setattr(held_pass, "place", counting)
    room = held_pass.Room([cluster("w", node("n1", "4"))])
    assert not room.take("a", pods(1, cpu="8"), Choice())
    assert not room.take("b", pods(1, cpu="8"), Choice())  # alike: not placed again
    assert not room.take("c", pods(1, cpu="8"), Choice(clusters=("w",)))  # another policy
    assert room.take("d", pods(1, cpu="3"), Choice())
    assert [w.groups[0].requests for w in placed] == [{"cpu": 8000}, {"cpu": 8000}, {"cpu": 3000}]
