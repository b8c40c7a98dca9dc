from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.placement.support import node

from jobrelay.placement.capacity import Reservation, WorkerCapacity
from jobrelay.placement.units import resources_of
from jobrelay.placement.workload import PodGroup, Taint, Toleration

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def group(count: int, name: str = "main", **requests: str) -> PodGroup:
    return PodGroup(
        name,
        count,
        resources_of({k.replace("gpu", "nvidia.com/gpu"): v for k, v in requests.items()}),
    )


@pytest.mark.parametrize(
    ("nodes", "groups", "reason"),
    [
        # The cluster's total would take it; no single node does.
        (
            (node("n1", "4"), node("n2", "4")),
            (group(1, cpu="6"),),
            "no node has 6 cpu free (largest free: 4)",
        ),
        (
            (node("n1", gpu=4, used={"nvidia.com/gpu": "2"}),),
            (group(1, gpu="4"),),
            "no node has 4 nvidia.com/gpu free (largest free: 2)",
        ),
        (
            (node("n1", "8"), node("n2", "4")),
            (group(8, cpu="2"),),
            "6 of 8 pods fit at once (per node: n1 4, n2 2)",
        ),
        (
            (node("n1", ready=False), node("n2", unschedulable=True)),
            (group(1, cpu="1"),),
            "no node can take a pod of this workload (1 not Ready, 1 unschedulable)",
        ),
        (
            (node("n1", gpu=4, taints=(GPU_TAINT,)),),
            (group(1, gpu="1"),),
            "no node can take a pod of this workload (1 taint nvidia.com/gpu=present:NoSchedule)",
        ),
        (
            (node("n1", "8", "8Gi"), node("n2", "2", "32Gi")),
            (group(1, cpu="4", memory="16Gi"),),
            "no node has 4 cpu, 16Gi memory free at once",
        ),
        (
            (node("n1", "8"),),
            (group(2, "a", cpu="4"), group(1, "b", cpu="1")),
            "no node has 1 cpu free (largest free: 0)",
        ),
        (
            (node("n1", "8"),),
            (group(1, "a", cpu="4"), group(2, "b", cpu="3")),
            "group b 1 of 2 pods fit at once (per node: n1 1)",
        ),
    ],
)
def test_reasons(nodes: tuple, groups: tuple[PodGroup, ...], reason: str) -> None:  # type: ignore[type-arg]
    assert WorkerCapacity(nodes).fit(groups).reason == reason


def test_fits_counted_per_node_and_placed() -> None:
    fit = WorkerCapacity((node("n1", "4"), node("n2", "8"))).fit((group(3, cpu="4"),))
    assert fit.fits
    assert fit.placed == (("main", "n1", 1), ("main", "n2", 2))


def test_a_pod_goes_where_its_selector_and_tolerations_allow() -> None:
    nodes = (
        node("cpu-1", "64"),
        node("gpu-1", "16", gpu=4, labels={"accel": "h100"}, taints=(GPU_TAINT,)),
    )
    wanted = PodGroup(
        "main",
        2,
        resources_of({"nvidia.com/gpu": "2"}),
        {"accel": "h100"},
        tolerations=(Toleration("nvidia.com/gpu", "Exists"),),
    )
    assert WorkerCapacity(nodes).fit((wanted,)).placed == (("main", "gpu-1", 2),)
    assert "1 nodeSelector" in str(WorkerCapacity(nodes[:1]).fit((wanted,)).reason)


def test_pod_slots_count() -> None:
    full = node("n1", used={"pods": "110"})
    assert (
        WorkerCapacity((full,)).fit((group(1),)).reason
        == "no node has 1 pods free (largest free: 0)"
    )


def test_reservations_take_their_room_first() -> None:
    reserved = Reservation("ns/earlier", (group(1, cpu="6"),))
    capacity = WorkerCapacity((node("n1", "8"),), (reserved,))
    assert capacity.fit((group(1, cpu="2"),)).fits
    assert not capacity.fit((group(1, cpu="3"),)).fits
    assert capacity.summary.reserved == {"cpu": 6000, "pods": 1}
    # A workload that will never fit ignores what is on the nodes now.
    assert capacity.empty.fit((group(1, cpu="8"),)).fits


_NODES = (
    node("n1", "8"),
    node("n2", "4", labels={"zone": "a"}),
    node("n3", "16", gpu=2, taints=(GPU_TAINT,)),
    node("n4", "2", used={"cpu": "1"}),
)
_groups = st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(0, 1)).map(
    lambda g: group(g[0], cpu=str(g[1]), gpu=str(g[2])) if g[2] else group(g[0], cpu=str(g[1]))
)
_reservations = st.lists(
    st.tuples(st.text("abc", min_size=1, max_size=3), st.lists(_groups, min_size=1, max_size=2)),
    max_size=8,
).map(lambda rs: tuple(Reservation(f"ns/{k}", tuple(g)) for k, g in rs))


@given(_reservations, _reservations, st.lists(_groups, min_size=1, max_size=2))
def test_one_reservation_more_is_the_same_as_all_laid_again(
    before: tuple[Reservation, ...], more: tuple[Reservation, ...], asked: list[PodGroup]
) -> None:
    """What the relay's overlay lays on top of its last one, one placement at a time, reads
    as the capacity with every reservation laid at once: fits, their reasons, the totals."""
    capacity = WorkerCapacity(_NODES)
    step_by_step = capacity.with_reservations(before)
    for reservation in more:
        step_by_step = step_by_step.with_reservation(reservation)
    at_once = capacity.with_reservations((*before, *more))
    assert step_by_step.reservations == at_once.reservations
    assert step_by_step.fit(tuple(asked)) == at_once.fit(tuple(asked))
    assert step_by_step.summary == at_once.summary
    assert step_by_step.usable_totals == at_once.usable_totals
