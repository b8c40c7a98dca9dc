"""decide() with capacity: where a workload goes, why it waits, and when a stuck one moves.

The workers here know their nodes (``capacity=``); the rows of test_decide.py are
blind workers, placed by load alone.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tests.unit.controller.builders import SETTINGS, job, mirror, snapshot, worker
from tests.unit.placement.support import node

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.leaving import Leaving
from jobrelay.controller.relay.plan import (
    Annotate,
    DeleteMirror,
    Place,
    Plan,
    RecordEvent,
    RequeueAfter,
    Retry,
    Terminal,
)
from jobrelay.controller.relay.snapshot import Snapshot, WorkerSnapshot
from jobrelay.controller.relay.steps.plan_parts import NOT_PLACED_LIMIT
from jobrelay.placement.capacity import WorkerCapacity
from jobrelay.placement.workload import Choice, Invalid, Taint
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import NOT_PLACED_ANNOTATION

RUNNING: JsonObj = {"startTime": "2026-03-01T12:00:00Z", "active": 1, "ready": 0}
LONG = 600.0  # seconds unschedulable: past the 300 s pending timeout
SHORT = 60.0
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def nodes(*n: Any) -> WorkerCapacity:
    return WorkerCapacity(tuple(n))


SMALL = nodes(node("s1", "4", "8Gi"), node("s2", "4", "8Gi"))
BIG = nodes(node("b1", "16", "64Gi"))
GPU = nodes(node("g1", "16", "64Gi", gpu=4, taints=(GPU_TAINT,)))
FULL = nodes(node("f1", "4", "8Gi", used={"cpu": "4"}))


ORDERED_SMALL_FIRST = {
    "jobrelay.dev/placement": "ordered",
    "jobrelay.dev/clusters": "w-small,w-big",
}


def asking(cpu: str = "1", *, gpu: int = 0, parallelism: int = 1, **extra: Any) -> JsonObj:
    obj = job(parallelism=parallelism, completions=parallelism, **extra)
    spec = obj["spec"]["template"]["spec"]
    requests = {"cpu": cpu}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    spec["containers"][0]["resources"] = {"requests": requests}
    return obj


def plan(obj: JsonObj, *workers: WorkerSnapshot, **fields: Any) -> Plan:
    s: Snapshot = dataclasses.replace(snapshot(obj, *workers), **fields)
    return decide(s)


def placed_on(p: Plan) -> str | None:
    places = [a for a in p.actions if isinstance(a, Place)]
    return places[0].cluster if places else None


def events(p: Plan) -> list[str]:
    return [a.reason for a in p.actions if isinstance(a, RecordEvent)]


@pytest.mark.parametrize(
    ("obj", "workers", "where"),
    [
        (asking(gpu=2), [("w-big", BIG), ("w-gpu", GPU)], "w-gpu"),
        (asking("2"), [("w-big", BIG), ("w-small", SMALL)], "w-big"),  # spread: least allocated
        (asking("6"), [("w-small", SMALL), ("w-big", BIG)], "w-big"),  # 8 CPUs, 4 per node
        (asking("1"), [("w-full", FULL), ("w-small", SMALL)], "w-small"),
        (
            asking("1", annotations=ORDERED_SMALL_FIRST),
            [("w-big", BIG), ("w-small", SMALL)],
            "w-small",
        ),
    ],
)
def test_a_workload_goes_where_its_pods_fit(
    obj: JsonObj, workers: list[tuple[str, WorkerCapacity]], where: str
) -> None:
    p = plan(obj, *(worker(name, capacity=c) for name, c in workers))
    assert placed_on(p) == where
    (place,) = [a for a in p.actions if isinstance(a, Place)]
    assert place.demand and place.demand[0].count == obj["spec"]["parallelism"]


def test_a_namespace_policy_holds_whatever_the_job_asks() -> None:
    obj = asking("1", annotations={"jobrelay.dev/clusters": "w-big"})
    p = plan(obj, worker("w-big", capacity=BIG), worker("w-small", capacity=SMALL),
             policy=Choice(clusters=("w-small",)))  # fmt: skip
    assert placed_on(p) is None
    assert events(p) == ["NotPlaced"]
    assert "w-big: excluded by namespace policy" in _event(p).message


def test_a_workload_that_fits_nowhere_now_is_held_and_told_why_once() -> None:
    obj = asking("1", parallelism=2)
    workers = (worker("w-full", capacity=FULL), worker("w-gpu", capacity=GPU))
    p = plan(obj, *workers)
    assert placed_on(p) is None
    assert isinstance(p.outcome, RequeueAfter)
    assert events(p) == ["NotPlaced"]
    assert p.held is not None
    (note,) = [a for a in p.actions if isinstance(a, Annotate)]
    assert note.annotations[NOT_PLACED_ANNOTATION].startswith("NotPlaced: w-full: ")
    # Told again only when the reason changes.
    again = plan(obj, *workers, held=p.held)
    assert events(again) == [] and again.held == p.held
    assert not [a for a in again.actions if isinstance(a, Annotate)]
    changed = plan(obj, worker("w-full", capacity=FULL, cordoned=True),
                   worker("w-gpu", capacity=GPU), held=p.held)  # fmt: skip
    assert events(changed) == ["NotPlaced"] and changed.held != p.held


def test_the_not_placed_annotation_stays_short_however_many_workers_explain() -> None:
    workers = [worker(f"w-full-{i:04d}", capacity=FULL) for i in range(500)]
    p = plan(asking("1", parallelism=2), *workers)
    (note,) = [a for a in p.actions if isinstance(a, Annotate)]
    value = note.annotations[NOT_PLACED_ANNOTATION]
    assert value.startswith("NotPlaced: ") and len(value) <= NOT_PLACED_LIMIT
    assert value.endswith("more)")


def test_the_same_reason_with_other_numbers_is_not_told_again() -> None:
    obj = asking("3")
    first = plan(obj, worker("w", capacity=nodes(node("n", "4", used={"cpu": "2"}))))
    second = plan(
        obj, worker("w", capacity=nodes(node("n", "4", used={"cpu": "3"}))), held=first.held
    )
    assert events(first) == ["NotPlaced"] and events(second) == []


def test_a_workload_larger_than_any_node_never_fits() -> None:
    p = plan(asking("64"), worker("w-big", capacity=BIG), worker("w-small", capacity=SMALL))
    assert events(p) == ["NeverFits"]
    assert "could run it even if it were empty" in _event(p).message
    assert "no node has 64 cpu free" in _event(p).message


def test_the_not_placed_annotation_is_written_before_the_event() -> None:
    # Events are written in the background: whoever sees the Event must find the
    # annotation already saying the same.
    p = plan(asking("64"), worker("w-big", capacity=BIG))
    kinds = [type(a) for a in p.actions if isinstance(a, (Annotate, RecordEvent))]
    assert kinds == [Annotate, RecordEvent]


def test_while_capacities_are_read_nothing_is_told() -> None:
    p = plan(asking("1"), worker("w1", capacity=None, connected=True))
    # builders.worker makes a worker without capacity blind; a starting one is not.
    p = plan(asking("1"), dataclasses.replace(worker("w1"), blind=False))
    assert placed_on(p) is None and events(p) == []
    assert isinstance(p.outcome, RequeueAfter)


def test_unreadable_placement_annotations_are_the_users_to_fix() -> None:
    p = plan(asking("1", annotations={"jobrelay.dev/placement": "fastest"}),
             worker("w", capacity=BIG))  # fmt: skip
    assert isinstance(p.outcome, Terminal) and p.outcome.reason == "InvalidPlacement"
    assert "jobrelay.dev/placement" in p.outcome.message


def test_an_unreadable_namespace_policy_holds_the_workload() -> None:
    p = plan(asking("1"), worker("w", capacity=BIG), policy=Invalid("bad selector"))
    assert placed_on(p) is None and events(p) == ["NotPlaced"]
    assert "a cluster admin must fix" in _event(p).message


# -- stuck Pending ----------------------------------------------------------------------


def stuck(**fields: Any) -> WorkerSnapshot:
    return worker(
        "w-small",
        capacity=FULL,
        mirror=mirror(job(), status={"active": 1}),
        unschedulable_for=fields.pop("waited", LONG),
        **fields,
    )


PLACED_SMALL = asking("1", placed="w-small", status={"active": 1})


def test_a_mirror_stuck_pending_past_the_timeout_moves_where_it_fits() -> None:
    p = plan(PLACED_SMALL, stuck(), worker("w-big", capacity=BIG))
    deletes = [a for a in p.actions if isinstance(a, DeleteMirror)]
    assert [d.wait_for_pods for d in deletes] == [True]
    assert isinstance(p.outcome, Retry)
    assert p.leaving is not None and p.leaving[0] == "w-small"
    assert "unschedulable on worker cluster w-small for 600s" in p.leaving[1]


@pytest.mark.parametrize(
    ("state", "other", "annotations"),
    [
        ({"waited": SHORT}, BIG, {}),  # not long enough
        ({"pods_started": True}, BIG, {}),  # a pod started: it stays
        ({}, FULL, {}),  # nowhere better to go
        ({}, BIG, {"jobrelay.dev/redispatch": "never"}),
    ],
)
def test_a_pending_mirror_stays_when_it_must(
    state: dict[str, Any], other: WorkerCapacity, annotations: dict[str, str]
) -> None:
    obj = asking("1", placed="w-small", status={"active": 1}, annotations=annotations)
    p = plan(obj, stuck(**state), worker("w-big", capacity=other))
    assert not [a for a in p.actions if isinstance(a, DeleteMirror)]
    assert p.leaving is None


def test_redispatch_always_moves_even_a_started_workload() -> None:
    obj = job(placed="w-small", status={"active": 1},
              annotations={"jobrelay.dev/redispatch": "always"})  # fmt: skip
    p = plan(obj, stuck(pods_started=True), worker("w-big", capacity=BIG))
    assert [a.wait_for_pods for a in p.actions if isinstance(a, DeleteMirror)] == [True]


def test_pending_timeout_zero_never_moves() -> None:
    settings = dataclasses.replace(SETTINGS, pending_timeout=0.0)
    p = plan(PLACED_SMALL, stuck(), worker("w-big", capacity=BIG), settings=settings)
    assert not [a for a in p.actions if isinstance(a, DeleteMirror)]


def test_a_move_begun_goes_on_once_the_mirror_is_gone() -> None:
    at_rest = asking(
        "1", placed="w-small", status={"startTime": "2026-03-01T12:00:00Z", "active": 0}
    )
    p = plan(
        at_rest,
        worker("w-small", capacity=FULL),
        worker("w-big", capacity=BIG),
        fresh=True,
        leaving=Leaving("w-small", "its pods stayed unschedulable"),
    )
    assert placed_on(p) == "w-big"
    (place,) = [a for a in p.actions if isinstance(a, Place)]
    assert place.history == ("w-small", "w-big")
    assert events(p)[-1] == "Redispatched"


def _event(p: Plan) -> RecordEvent:
    return next(a for a in p.actions if isinstance(a, RecordEvent))
