"""decide() follows only the mirror jobrelay created: the one recorded on the object.

A worker can make an object that carries our origin labels, the management
object's UID and any ``jobrelay.dev/run``: that used to be followed, re-place the
workload onto that worker (PlacementConflict) and run it twice. Now the UID of
every mirror jobrelay creates is recorded (``jobrelay.dev/mirrors``) and only that
one is followed; an object placed before the record was kept adopts the current
run's mirror on its placed worker, once. A mirror jobrelay did not create is
foreign: reported, never followed, never deleted while its workload lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from tests.unit.controller.builders import (
    COMPLETE,
    CREATED_LOOK,
    RUNNING,
    RV,
    UID,
    job,
    mirror,
    outcome_summary,
    snapshot,
    summary,
    worker,
)

from jobrelay.controller.relay.decide import decide
from jobrelay.controller.relay.plan import (
    Annotate,
    DeleteMirror,
    Done,
    Outcome,
    ReadFresh,
    RecordEvent,
    RequeueAfter,
    Retry,
)
from jobrelay.controller.relay.snapshot import WorkerSnapshot
from jobrelay.placement.namespaces import WorkerNamespaces
from jobrelay.vocabulary.json_types import JsonObj
from jobrelay.vocabulary.names import MIRRORS_ANNOTATION

w = worker
RETRY_HELD = RequeueAfter(15.0)


def recorded(*entries: str, **kwargs: Any) -> JsonObj:
    """A Job placed as ``kwargs`` say, recording ``entries`` ("run:worker:uid")."""
    annotations = {MIRRORS_ANNOTATION: ",".join(entries)} if entries else {}
    return job(annotations=annotations, **kwargs)


def forged(run: int, uid: str = "f-9", status: JsonObj | None = RUNNING) -> JsonObj:
    """What a worker can make: our labels, the Job's UID, a run of its choosing."""
    return mirror(job(), uid=uid, run=run, status=status)


@dataclass(frozen=True)
class Case:
    obj: JsonObj
    workers: tuple[WorkerSnapshot, ...]
    actions: tuple[tuple[Any, ...], ...]  # every action but RecordEvent, in order
    outcome: Outcome
    events: tuple[tuple[str, str], ...] = ()
    fresh: bool = False


# Worker namespaces (placement/namespaces.py): team-a closed to this manager, open, unknown.
CLOSED = WorkerNamespaces("manager", create=False, synced=True, origins={"team-a": None})
OPEN = WorkerNamespaces("manager", synced=True, origins={"team-a": "manager"})
UNLISTED = WorkerNamespaces("manager", synced=False)
FOREIGN = (("Warning", "ForeignMirror"),)
FOREIGN_LOG = (("Log", "warning"),)

CASES = {
    # -- a forged mirror with a higher run -------------------------------------------
    "a forged later run on another worker: the recorded mirror stays followed": Case(
        obj=recorded("1:w1:m-1", placed="w1", status={"startTime": "2026-03-01T12:00:00Z"}),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)), w("w2", mirror=forged(run=5))),
        actions=(*FOREIGN_LOG, ("Status",)),
        events=FOREIGN,
        fresh=True,
        outcome=Done(),
    ),
    "a forged later run on another worker, before our mirror is made: made where placed": Case(
        obj=recorded(placed="w1", history=("w1",)),
        workers=(w("w1"), w("w2", mirror=forged(run=2))),
        fresh=True,
        actions=(*FOREIGN_LOG, ("Create", "w1", UID)),
        events=(*FOREIGN, ("Normal", "Dispatched")),
        outcome=CREATED_LOOK,
    ),
    "a forged mirror of the current run on another worker: not followed": Case(
        obj=recorded(placed="w1", history=("w1",)),
        workers=(w("w1"), w("w2", mirror=forged(run=1))),
        fresh=True,
        actions=(*FOREIGN_LOG, ("Create", "w1", UID)),
        events=(*FOREIGN, ("Normal", "Dispatched")),
        outcome=CREATED_LOOK,
    ),
    "not placed, a forged mirror on the emptiest worker: placed elsewhere, not there": Case(
        obj=recorded(),
        workers=(w("w1", load=5), w("w2", mirror=forged(run=1))),
        fresh=True,
        actions=(*FOREIGN_LOG, ("Place", "w1", RV), ("Create", "w1", UID)),
        events=(*FOREIGN, ("Normal", "Dispatched")),
        outcome=CREATED_LOOK,
    ),
    "a worker left with its mirror going, a forged later run on another: not moved there": Case(
        obj=recorded("1:w1:m-1", placed="w1", history=("w1",), status=RUNNING),
        workers=(
            w("w1", drain="All", mirror=mirror(job(), status=RUNNING)),
            w("w2", mirror=forged(run=2)),
            w("w3", load=5),
        ),
        actions=(*FOREIGN_LOG, ("Delete", "w1", "m-1")),
        events=FOREIGN,
        fresh=True,
        outcome=Retry(""),
    ),
    "moved off a drained worker: placed where no forged mirror is": Case(
        obj=recorded("1:w1:m-1", placed="w1", history=("w1",)),
        workers=(
            w("w1", drain="All"),
            w("w2", mirror=forged(run=2)),
            w("w3", load=5),
        ),
        fresh=True,
        actions=(*FOREIGN_LOG, ("Place", "w3", RV, ("w1", "w3")), ("Log", "info")),
        events=(*FOREIGN, ("Normal", "Redispatched")),
        outcome=Done(),
    ),
    # -- the recorded mirror -----------------------------------------------------------
    "the recorded mirror is followed": Case(
        obj=recorded("1:w1:m-1", placed="w1"),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        actions=(("Status",),),
        outcome=Done(),
    ),
    "on the placed worker, another UID than the recorded one: not followed, not deleted": Case(
        obj=recorded("1:w1:m-1", placed="w1", status=RUNNING),
        workers=(w("w1", mirror=mirror(job(), uid="m-other", status=COMPLETE)),),
        actions=FOREIGN_LOG,
        events=FOREIGN,
        fresh=True,
        outcome=RETRY_HELD,
    ),
    "an earlier run's recorded mirror is deleted, a forged earlier one is not": Case(
        obj=recorded("1:w1:m-1", "2:w2:m-2", placed="w2", history=("w1", "w2"), status=RUNNING),
        workers=(
            w("w1", mirror=mirror(job(), uid="m-1", status=RUNNING)),
            w("w2", mirror=mirror(job(), uid="m-2", run=2, status=RUNNING)),
            w("w3", mirror=mirror(job(), uid="f-3", run=1, status=RUNNING)),
        ),
        actions=(("Delete", "w1", "m-1"), *FOREIGN_LOG),
        events=FOREIGN,
        fresh=True,
        outcome=Done(),
    ),
    "finished: the recorded mirror is deleted, a forged one left alone": Case(
        obj=recorded("1:w1:m-1", placed="w1", status=COMPLETE),
        workers=(w("w1", mirror=mirror(job(), status=COMPLETE)), w("w2", mirror=forged(run=3))),
        actions=(("Delete", "w1", "m-1"),),
        outcome=Done(),
    ),
    # -- objects placed before the record was kept; a restart before the record ------
    "unrecorded, of the current run on its placed worker: the apiserver is asked first": Case(
        obj=recorded(placed="w1"),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        actions=(),
        outcome=ReadFresh(obj=True),
    ),
    "unrecorded, and the apiserver's copy agrees: adopted (recorded), once": Case(
        obj=recorded(placed="w1"),
        workers=(w("w1", mirror=mirror(job(), status=RUNNING)),),
        fresh=True,
        actions=(("Annotate", MIRRORS_ANNOTATION), ("Log", "info")),
        outcome=Done(),
    ),
    "unrecorded, with a later run than its placements: foreign": Case(
        obj=recorded(placed="w1"),
        workers=(w("w1", mirror=forged(run=2)),),
        fresh=True,
        actions=FOREIGN_LOG,
        events=FOREIGN,
        outcome=RETRY_HELD,
    ),
    "this run's record names a gone mirror: forgotten before another is made": Case(
        obj=recorded("1:w1:m-1", placed="w1"),
        workers=(w("w1"),),
        fresh=True,
        actions=(("Annotate", MIRRORS_ANNOTATION), ("Create", "w1", UID)),
        events=(("Normal", "Dispatched"),),
        outcome=CREATED_LOOK,
    ),
    # -- PlacementConflict -------------------------------------------------------------
    "the recorded mirror runs off its placement: the placement follows it": Case(
        obj=recorded("1:w2:m-1", placed="w1"),
        workers=(w("w1"), w("w2", mirror=mirror(job(), status=RUNNING))),
        actions=(("Log", "warning"), ("Place", "w2", RV)),
        events=(("Warning", "PlacementConflict"),),
        outcome=Done(),
    ),
    "the recorded mirror runs off its placement on a cordoned worker: stopped, not placed": Case(
        obj=recorded("1:w2:m-1", placed="w1"),
        workers=(w("w1"), w("w2", cordoned=True, mirror=mirror(job(), status=RUNNING))),
        actions=(("Log", "warning"), ("Delete", "w2", "m-1")),
        events=(("Warning", "PlacementConflict"),),
        outcome=Retry(""),
    ),
    "the recorded mirror runs off its placement on a draining worker: stopped, not placed": Case(
        obj=recorded("1:w2:m-1", placed="w1"),
        workers=(w("w1"), w("w2", drain="NotStarted", mirror=mirror(job(), status=RUNNING))),
        actions=(("Log", "warning"), ("Delete", "w2", "m-1")),
        events=(("Warning", "PlacementConflict"),),
        outcome=Retry(""),
    ),
    "the recorded mirror runs off its placement, its namespace closed there: stopped": Case(
        obj=recorded("1:w2:m-1", placed="w1"),
        workers=(w("w1"), w("w2", namespaces=CLOSED, mirror=mirror(job(), status=RUNNING))),
        actions=(("Log", "warning"), ("Delete", "w2", "m-1")),
        events=(("Warning", "PlacementConflict"),),
        outcome=Retry(""),
    ),
    "the recorded mirror runs off its placement, namespaces not listed there: waits": Case(
        obj=recorded("1:w2:m-1", placed="w1"),
        workers=(w("w1"), w("w2", namespaces=UNLISTED, mirror=mirror(job(), status=RUNNING))),
        actions=(),
        outcome=Retry(""),
    ),
    "the recorded mirror runs off its placement, its namespace open there: followed": Case(
        obj=recorded("1:w2:m-1", placed="w1"),
        workers=(w("w1"), w("w2", namespaces=OPEN, mirror=mirror(job(), status=RUNNING))),
        actions=(("Log", "warning"), ("Place", "w2", RV)),
        events=(("Warning", "PlacementConflict"),),
        outcome=Done(),
    ),
    "its stopped mirror still going off its placement: nothing made until it is gone": Case(
        obj=recorded("1:w2:m-1", placed="w1"),
        workers=(w("w1"), w("w2", cordoned=True, mirror=mirror(job(), deleting=True))),
        fresh=True,
        actions=(),
        outcome=Retry(""),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_decide_follows_only_the_mirror_it_created(name: str) -> None:
    case = CASES[name]
    plan = decide(snapshot(case.obj, *case.workers, fresh=case.fresh, record=False))
    actions = tuple(summary(a) for a in plan.actions if not isinstance(a, RecordEvent))
    events = tuple((a.type, a.reason) for a in plan.actions if isinstance(a, RecordEvent))
    assert (actions, events, outcome_summary(plan.outcome)) == (
        case.actions,
        case.events,
        case.outcome,
    )


def test_a_stopped_mirror_waits_for_its_pods() -> None:
    obj = recorded("1:w2:m-1", placed="w1")
    workers = (w("w1"), w("w2", cordoned=True, mirror=mirror(job(), status=RUNNING)))
    plan = decide(snapshot(obj, *workers, record=False))
    (delete,) = [a for a in plan.actions if isinstance(a, DeleteMirror)]
    assert delete.wait_for_pods


def test_adoption_records_the_uid_seen_on_the_placed_worker() -> None:
    obj = recorded("1:w9:m-0", placed="w1", history=("w9", "w1"))
    plan = decide(
        snapshot(obj, w("w1", mirror=mirror(job(), uid="m-7", run=2)), fresh=True, record=False)
    )
    (annotate,) = [a for a in plan.actions if isinstance(a, Annotate)]
    assert annotate.annotations == {MIRRORS_ANNOTATION: "1:w9:m-0,2:w1:m-7"}


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(job(), id="the cache does not show the placement yet"),
        pytest.param(recorded("1:w1:m-0", placed="w1"), id="nor the record of the new mirror"),
    ],
)
def test_a_lagging_cache_of_the_object_reads_it_again_before_calling_a_mirror_foreign(
    obj: JsonObj,
) -> None:
    """Right after jobrelay placed a workload and created its mirror, the worker's cache
    may show the mirror before the manager's cache shows the placement and its record:
    that mirror is ours. Only a fresh read of the object may call it foreign (found under
    load by the throughput bench: ForeignMirror Warnings about jobrelay's own mirrors)."""
    ours = w("w1", mirror=mirror(job(), uid="m-1", status=RUNNING))
    plan = decide(snapshot(obj, ours, record=False))
    assert outcome_summary(plan.outcome) == outcome_summary(ReadFresh(obj=True))
    assert not [a for a in plan.actions if isinstance(a, RecordEvent)]
    forged_on_fresh = decide(snapshot(obj, ours, fresh=True, record=False))
    assert "ForeignMirror" in [
        a.reason for a in forged_on_fresh.actions if isinstance(a, RecordEvent)
    ]
