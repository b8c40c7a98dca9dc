"""decide() when a mirror's pods cannot run on their worker for the worker's fault: the
mirror is stopped, the workload moves elsewhere with the move recorded and counted, the
worker it left is avoided a while, and its own failures never move it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from tests.unit.controller.builders import NOW, SETTINGS, job, mirror, snapshot, worker
from tests.unit.controller.test_decide_placement import BIG, asking, plan

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.leaving import Leaving, WorkerFailure
from jobrelay.controller.relay.plan import DeleteMirror, Place, Plan, RecordEvent, Retry
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import MAX_MOVES_ANNOTATION, WORKER_FAILURES_ANNOTATION

FAULT = "ErrImagePull (container main): pull access denied"
AT_REST = {"startTime": "2026-03-01T12:00:00Z", "active": 0}


def failing_worker(**fields: Any) -> Any:
    return worker(
        "w-1",
        capacity=BIG,
        mirror=mirror(job(), status={"active": 1}),
        worker_fault=fields.pop("worker_fault", FAULT),
        **fields,
    )


def placed(**annotations: str) -> JsonObj:
    return asking("1", placed="w-1", status={"active": 1}, annotations=annotations)


def moved(obj: JsonObj, **fields: Any) -> Plan:
    """The decision once the mirror on w-1 is gone, the move remembered."""
    at_rest = {**obj, "status": AT_REST}
    why = f"{FAULT} on worker cluster w-1"
    fields.setdefault("leaving", Leaving("w-1", why, WorkerFailure.FAULT))
    return plan(
        at_rest, worker("w-1", capacity=BIG), worker("w-2", capacity=BIG), fresh=True, **fields
    )


def test_a_worker_side_fault_stops_the_mirror_first() -> None:
    p = plan(placed(), failing_worker(), worker("w-2", capacity=BIG))
    assert [d.wait_for_pods for d in p.actions if isinstance(d, DeleteMirror)] == [True]
    assert isinstance(p.outcome, Retry)
    assert p.leaving == Leaving(
        "w-1", f"{FAULT} on worker cluster w-1", worker_failure=WorkerFailure.FAULT
    )


def test_once_stopped_it_moves_recorded_and_is_told_which_worker_and_why() -> None:
    p = moved(placed())
    (place,) = [a for a in p.actions if isinstance(a, Place)]
    assert place.cluster == "w-2" and place.history == ("w-1", "w-2")
    assert place.sets == ((WORKER_FAILURES_ANNOTATION, f"w-1@{NOW}"),)
    (event,) = [a for a in p.actions if isinstance(a, RecordEvent)]
    assert (event.type, event.reason) == ("Warning", "MovedAfterWorkerFailure")
    assert "from worker cluster w-1 to w-2" in event.message
    assert "ErrImagePull" in event.message and "move 1 of 3" in event.message


def test_the_last_move_says_so_and_an_unusable_budget_is_named() -> None:
    p = moved(placed(**{MAX_MOVES_ANNOTATION: "1"}))
    (event,) = [a for a in p.actions if isinstance(a, RecordEvent)]
    assert "move 1 of 1 (its last" in event.message
    p = moved(placed(**{MAX_MOVES_ANNOTATION: "lots"}))
    (event,) = [a for a in p.actions if isinstance(a, RecordEvent)]
    assert "'lots' is not a number" in event.message and "move 1 of 3" in event.message


@pytest.mark.parametrize(
    ("annotations", "moves"),
    [
        ({}, True),
        ({MAX_MOVES_ANNOTATION: "0"}, False),
        ({WORKER_FAILURES_ANNOTATION: "w-3@2026-03-01T11:00:00Z"}, True),
        (
            {
                WORKER_FAILURES_ANNOTATION: "w-3@2026-03-01T11:00:00Z,w-4@2026-03-01T11:01:00Z,"
                "w-5@2026-03-01T11:02:00Z"
            },
            False,  # three moves made: the default budget is spent
        ),
        ({"jobrelay.dev/redispatch": "never"}, False),
    ],
)
def test_the_budget_and_at_most_once_decide_whether_it_moves(
    annotations: dict[str, str], moves: bool
) -> None:
    p = plan(placed(**annotations), failing_worker(), worker("w-2", capacity=BIG))
    assert bool([a for a in p.actions if isinstance(a, DeleteMirror)]) is moves


def test_no_fault_no_move() -> None:
    p = plan(placed(), failing_worker(worker_fault=None), worker("w-2", capacity=BIG))
    assert not [a for a in p.actions if isinstance(a, DeleteMirror)]


def test_a_worker_left_recently_is_avoided_and_later_taken_again() -> None:
    recent = asking(annotations={WORKER_FAILURES_ANNOTATION: "w-1@2026-03-01T12:05:00Z"})
    only_w1 = (worker("w-1", capacity=BIG),)
    p = decide(snapshot(recent, *only_w1))
    assert not [a for a in p.actions if isinstance(a, Place)]
    later = dataclasses.replace(SETTINGS, failed_worker_avoid_for=60.0)
    p = decide(snapshot(recent, *only_w1, settings=later))
    assert [a.cluster for a in p.actions if isinstance(a, Place)] == ["w-1"]


def test_a_recent_failure_steers_a_first_placement_elsewhere() -> None:
    recent = asking(annotations={WORKER_FAILURES_ANNOTATION: "w-1@2026-03-01T12:05:00Z"})
    p = decide(snapshot(recent, worker("w-1", capacity=BIG), worker("w-2", capacity=BIG)))
    assert [a.cluster for a in p.actions if isinstance(a, Place)] == ["w-2"]


def test_a_pending_timeout_move_is_counted_and_told_both_ways() -> None:
    p = moved(
        placed(), leaving=Leaving("w-1", "its pods stayed unschedulable", WorkerFailure.PENDING)
    )
    assert [(e.type, e.reason) for e in p.actions if isinstance(e, RecordEvent)] == [
        ("Warning", "MovedAfterWorkerFailure"),
        ("Normal", "Redispatched"),
    ]
    (place,) = [a for a in p.actions if isinstance(a, Place)]
    assert place.sets == ((WORKER_FAILURES_ANNOTATION, f"w-1@{NOW}"),)
